"""The VRAM of one engine placement, term by term (bytes), and its one-line rendering in GiB."""
from __future__ import annotations

from dataclasses import dataclass

GIB = 2 ** 30


@dataclass(frozen=True)
class VramTerms:
    """What stays on the GPU besides the routed-expert slots. ``model`` is the model buffer by part
    (name, bytes); ``kv`` the target's KV cache; ``compute`` the engine's compute buffer (its
    largest live set of activations); ``context`` the CUDA context and driver reservations; ``pool``
    the peak of the engine's own device memory pool (ggml-cuda's per-op temporaries);
    ``draft`` a draft model's weights and KV; ``host_weights`` what the engine keeps in host memory
    that the generic plan counted in VRAM (llama.cpp's token embedding)."""

    model: tuple
    kv: float
    compute: float
    context: float
    pool: float = 0.0
    draft: float = 0.0
    draft_kv: float = 0.0
    draft_workspace: float = 0.0
    host_weights: float = 0.0
    formats: str = ""          # the weight formats as the engine stores them, for the plan's headline

    @property
    def model_bytes(self) -> float:
        """The model buffer without expert slots."""
        return float(sum(b for _, b in self.model))

    def rows(self, slots_bytes: float) -> list[tuple[str, float]]:
        """(name, bytes) of every term, expert slots included, in print order."""
        rows = [(f"model buffer: {name}", b) for name, b in self.model]
        rows += [("expert slots", slots_bytes), ("KV cache", self.kv), ("compute buffer", self.compute),
                 ("CUDA context", self.context)]
        if self.pool:
            rows.append(("CUDA pool", self.pool))
        if self.draft or self.draft_kv or self.draft_workspace:
            rows.append(("draft", self.draft + self.draft_kv + self.draft_workspace))
        return rows

    def render(self, slots_bytes: float) -> str:
        """The terms as ``name X.XX GiB`` joined by commas."""
        return ", ".join(f"{name} {b / GIB:.2f} GiB" for name, b in self.rows(slots_bytes))
