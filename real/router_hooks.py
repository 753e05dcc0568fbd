"""Recording what each MoE layer's router chose, through forward hooks on the gate modules.

In transformers 5.x every MoE block of the supported families (Qwen3-MoE, DeepSeek-V2, Mixtral,
OLMoE, ...) has a ``mlp.gate`` router that returns ``(logits, top_k_weights, top_k_index)``; a hook
on it sees exactly the ids and weights the block uses. Dense layers have no gate and are skipped.

Next-layer prediction signal (``next_pred``): inside layer ``l``'s gate hook we apply the gate of
the next MoE layer to the hidden state entering layer ``l``'s gate (the post-attention, normed MoE
input of layer ``l``) and keep its top-k ids. This is the cheap cross-layer guess that
Mixtral-offloading ("speculative expert loading") and Fate use: it is available one layer early,
before layer ``l+1``'s attention has run. The last MoE layer has no successor; its row is -1.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from real.speculative import DecodeObserver, SpeculativeDecoder, Step, mean_accepted
from traces.schema import SDRecord, Trace


@dataclass
class ForwardRouting:
    """Routing of the ``n`` positions of one forward: ids, weights and next-layer predictions."""

    ids: np.ndarray  # int16 [n, L, k]
    weights: np.ndarray  # float32 [n, L, k]
    next_pred: np.ndarray  # int16 [n, L, k], row L-1 is -1


def find_moe_layers(model) -> list[tuple[int, torch.nn.Module]]:
    """``(decoder layer index, gate module)`` of every MoE layer; dense layers are skipped."""
    layers = getattr(getattr(model, "model", model), "layers", None)
    if layers is None:
        raise ValueError(f"{type(model).__name__} has no decoder layers at model.model.layers")
    found = []
    for i, layer in enumerate(layers):
        mlp = getattr(layer, "mlp", None)
        gate = getattr(mlp, "gate", None)
        if isinstance(gate, torch.nn.Module) and hasattr(mlp, "experts"):
            found.append((i, gate))
    return found


class RouterRecorder:
    """Hooks every MoE gate of ``model``; :meth:`pop` returns the routing of the last forward(s).

    Use as a context manager (hooks are removed on exit). Rows of several forwards between two
    :meth:`pop` calls are concatenated in order, so a caller normally pops after every forward.
    """

    def __init__(self, model, predict_next: bool = True):
        self.moe_layers = find_moe_layers(model)
        if not self.moe_layers:
            raise ValueError(f"{type(model).__name__} has no MoE layers (no mlp.gate router found)")
        self.predict_next = predict_next
        self._handles: list = []
        self._rows: list[list[tuple]] = [[] for _ in self.moe_layers]
        self._predicting = False

    @property
    def n_layers(self) -> int:
        """Number of MoE layers recorded."""
        return len(self.moe_layers)

    def __enter__(self) -> "RouterRecorder":
        for pos, (_, gate) in enumerate(self.moe_layers):
            self._handles.append(gate.register_forward_hook(self._hook(pos)))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _hook(self, pos: int):
        def hook(module, args, out):
            if self._predicting:
                return
            k = out[2].shape[-1]  # copies stay on the device until pop(): no sync per layer
            idx, weights = (t.reshape(-1, k).detach().clone() for t in (out[2], out[1]))
            self._rows[pos].append((idx, weights, self._predict(pos, args[0], k)))
        return hook

    def _predict(self, pos: int, hidden: torch.Tensor, k: int) -> torch.Tensor:
        """Top-k ids that the next MoE layer's gate picks from this layer's gate input."""
        n = hidden.reshape(-1, hidden.shape[-1]).shape[0]
        if not self.predict_next or pos + 1 >= len(self.moe_layers):
            return torch.full((n, k), -1, dtype=torch.long, device=hidden.device)
        self._predicting = True
        try:
            out = self.moe_layers[pos + 1][1](hidden)
        finally:
            self._predicting = False
        return out[2].reshape(-1, k).detach()

    def pop(self) -> ForwardRouting:
        """Routing recorded since the last pop, as arrays ``[n, L, k]``; clears the buffer."""
        rows, self._rows = self._rows, [[] for _ in self.moe_layers]
        counts = {sum(r[0].shape[0] for r in layer) for layer in rows}
        if counts == {0}:
            raise RuntimeError("no routing recorded since the last pop (did the target run?)")
        if len(counts) != 1:
            raise RuntimeError(f"MoE layers saw different numbers of positions: {sorted(counts)}")

        def gather(j: int, dtype: torch.dtype) -> np.ndarray:
            per_layer = [torch.cat([r[j].to(dtype) for r in layer]) for layer in rows]
            return torch.stack(per_layer, dim=1).cpu().numpy()
        return ForwardRouting(ids=gather(0, torch.int16), weights=gather(1, torch.float32),
                              next_pred=gather(2, torch.int16))

    def clear(self) -> None:
        """Drop anything recorded so far (e.g. left over from an interrupted forward)."""
        self._rows = [[] for _ in self.moe_layers]


class RoutingCollector(DecodeObserver):
    """Decode observer that files the recorder's routing by phase of a speculative decode.

    After a decode: ``prefill`` holds the prompt's routing, ``windows`` one :class:`ForwardRouting`
    per verify step (all ``gamma + 1`` positions, rejected drafts included), ``accepted`` the kept
    drafts per step, and :meth:`tokens` the routing of every generated token, taken from the
    forward where that token was the INPUT: a step's rows ``0..accepted`` (row 0 is the previous
    step's last token), plus the decoder's final forward for the very last token.
    """

    def __init__(self, recorder: RouterRecorder):
        self.recorder = recorder
        self.prefill: ForwardRouting | None = None
        self.windows: list[ForwardRouting] = []
        self.accepted: list[int] = []
        self._token_rows: list[ForwardRouting] = []

    def on_prefill(self, prompt_len: int, first_token: int) -> None:
        """Keep the prompt's routing."""
        self.prefill = self.recorder.pop()

    def on_step(self, step: Step) -> None:
        """Keep the verify window and the rows of the tokens it accepted."""
        window = self.recorder.pop()
        self.windows.append(window)
        self.accepted.append(step.accepted)
        self._token_rows.append(_rows(window, step.accepted + 1))

    def on_final(self, token: int) -> None:
        """Keep the routing of the last generated token."""
        self._token_rows.append(self.recorder.pop())

    def tokens(self) -> ForwardRouting:
        """Routing of the generated tokens whose routing exists, in order (``[T, L, k]``)."""
        return ForwardRouting(*(np.concatenate([getattr(r, f) for r in self._token_rows])
                                for f in ("ids", "weights", "next_pred")))

    def sd_experts(self, width: int | None = None) -> np.ndarray:
        """Routing of every verified position, ``[S, gamma + 1, L, k]`` int16; windows shorter
        than ``width`` (a step that drafted fewer tokens) are padded with -1, as the schema says."""
        width = width or max(w.ids.shape[0] for w in self.windows)
        out = []
        for w in self.windows:
            pad = np.full((width - w.ids.shape[0],) + w.ids.shape[1:], -1, dtype=w.ids.dtype)
            out.append(np.concatenate([w.ids, pad]))
        return np.stack(out)


def _rows(r: ForwardRouting, n: int) -> ForwardRouting:
    return ForwardRouting(r.ids[:n], r.weights[:n], r.next_pred[:n])


def capture_trace(recorder: RouterRecorder, decoder: SpeculativeDecoder, input_ids,
                  max_new_tokens: int, meta: dict) -> tuple[Trace, list[int]]:
    """Decode ``input_ids`` with ``decoder`` while ``recorder`` hooks its target; build the trace.

    The trace holds the routing of all ``T`` generated tokens (``experts``, ``weights``,
    ``next_pred``), the prompt's routing (``prefill``) and, when ``decoder.gamma > 0``, the SD
    record. ``meta`` is completed with the run's counts. Returns ``(trace, generated tokens)``.
    """
    collector = RoutingCollector(recorder)
    decoder.observer, decoder.final_forward = collector, True
    recorder.clear()
    tokens, steps = decoder.generate(input_ids, max_new_tokens)
    rows = collector.tokens()
    sd = None
    if decoder.gamma > 0:
        n = len(steps)
        experts = collector.sd_experts(decoder.gamma + 1) if n else np.zeros((0, decoder.gamma + 1, rows.ids.shape[1],
                                                              rows.ids.shape[2]), np.int16)
        sd = SDRecord(decoder.gamma, experts, np.array(collector.accepted, np.int16),
                      np.array([s.n_verified for s in steps], np.int16))
    meta = dict(meta, n_generated=len(tokens), n_steps=len(steps), mean_accepted=mean_accepted(steps),
                prompt_tokens=int(collector.prefill.ids.shape[0]),
                stop_reason="eos" if tokens[-1] in decoder.eos else "max_new_tokens")
    trace = Trace(meta=meta, experts=rows.ids, weights=rows.weights, next_pred=rows.next_pred,
                  sd=sd, prefill=collector.prefill.ids)
    return trace, tokens
