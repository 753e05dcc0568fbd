"""Resolving model names: ``tiny:<kind>`` test models, local checkpoints, or Hugging Face ids.

Configs are read first (cheap), so a missing model, a non-MoE target or a vocabulary mismatch is
reported before any weights are loaded. Every problem raises :class:`traces.errors.TraceError`
naming the argument (``target``, ``draft``, ``tokenizer``) and what was wrong.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from real.router_hooks import find_moe_layers
from real.tiny_models import TINY_KINDS, build_tiny, tiny_config
from traces.errors import TraceError

TINY_PREFIX = "tiny:"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def is_tiny(name: str) -> bool:
    """Whether ``name`` names a built-in tiny model (``tiny:qwen3_moe`` ...)."""
    return str(name).startswith(TINY_PREFIX)


def _tiny_kind(name: str, arg: str) -> str:
    kind = name[len(TINY_PREFIX):]
    if kind not in TINY_KINDS:
        choices = ", ".join(TINY_PREFIX + k for k in TINY_KINDS)
        raise TraceError(name, arg, f"unknown tiny model; choose one of {choices}")
    return kind


def _looks_local(name: str) -> bool:
    """A name that can only be a filesystem path (absolute, relative with ./ or ~, or a/b/c)."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or os.sep in name.replace("/", "")


def load_config(name: str, arg: str = "target"):
    """The transformers config of ``name``; raises ``TraceError`` if it cannot be found."""
    if is_tiny(name):
        return tiny_config(_tiny_kind(name, arg))
    from transformers import AutoConfig
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise TraceError(name, arg, "folder has no config.json (not a Hugging Face checkpoint)")
        return AutoConfig.from_pretrained(path)
    if _looks_local(name):
        raise TraceError(name, arg, "no such model path")
    try:
        return AutoConfig.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise TraceError(name, arg, "neither a local path nor a loadable Hugging Face model id "
                                    f"(offline and not in the local cache?): {exc}") from None


def moe_shape(config, name: str, arg: str = "target") -> dict:
    """``n_experts``, ``top_k`` and ``n_shared_experts`` of an MoE config; error if it is dense."""
    text = config.get_text_config()
    n_experts = next((getattr(text, a) for a in ("num_experts", "n_routed_experts", "num_local_experts")
                      if getattr(text, a, None)), None)
    top_k = getattr(text, "num_experts_per_tok", None)
    if not n_experts or not top_k:
        raise TraceError(name, arg, f"not a mixture-of-experts model ({type(config).__name__} has no "
                                    "routed experts); the target must be MoE")
    return {"n_experts": int(n_experts), "top_k": int(top_k),
            "n_shared_experts": int(getattr(text, "n_shared_experts", 0) or 0)}


def vocab_size(config) -> int:
    """Vocabulary size (rows of the embedding table) of a config."""
    return int(config.get_text_config().vocab_size)


def resolve_dtype(name: str) -> torch.dtype:
    """``float32`` / ``bfloat16`` / ``float16`` to a torch dtype; ``TraceError`` otherwise."""
    if name not in DTYPES:
        raise TraceError(name, "dtype", f"choose one of {', '.join(DTYPES)}")
    return DTYPES[name]


def load_model(name: str, dtype: torch.dtype, device: str, seed: int = 0):
    """Load ``name`` for inference (eval mode) on ``device``; tiny models are built from ``seed``."""
    if is_tiny(name):
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        return build_tiny(_tiny_kind(name, "model"), seed=seed, dtype=dtype).to(device)
    from transformers import AutoModelForCausalLM
    path = Path(name).expanduser()
    source = str(path) if path.exists() else name
    if device != "cpu" and _has_accelerate():  # straight onto the device(s), no host copy
        return AutoModelForCausalLM.from_pretrained(source, dtype=dtype, device_map=device).eval()
    return AutoModelForCausalLM.from_pretrained(source, dtype=dtype).to(device).eval()


def _has_accelerate() -> bool:
    import importlib.util
    return importlib.util.find_spec("accelerate") is not None


def load_tokenizer(name: str):
    """The tokenizer saved with checkpoint (or Hub id) ``name``."""
    from transformers import AutoTokenizer
    path = Path(name).expanduser()
    try:
        return AutoTokenizer.from_pretrained(str(path) if path.exists() else name)
    except (OSError, ValueError) as exc:
        raise TraceError(name, "tokenizer", f"cannot load a tokenizer: {exc}") from None


def moe_summary(model) -> dict:
    """MoE layout of a loaded model: MoE layer ids, dense layer count, shared experts."""
    moe = find_moe_layers(model)
    if not moe:
        raise TraceError(type(model).__name__, "target", "the loaded model has no MoE router (mlp.gate)")
    n_total = len(model.model.layers)
    mlp = model.model.layers[moe[0][0]].mlp
    shared = getattr(model.config.get_text_config(), "n_shared_experts", None)
    if shared is None:
        shared = 1 if hasattr(mlp, "shared_expert") else 0
    return {"moe_layer_ids": [i for i, _ in moe], "n_layers": len(moe),
            "n_dense_layers": n_total - len(moe), "n_shared_experts": int(shared)}


def check_pair(target: str, draft: str | None) -> tuple[dict, int]:
    """Check a target (must be MoE) and optional draft (same vocabulary) from their configs.

    Returns the target's :func:`moe_shape` and vocabulary size; loads no weights.
    """
    t_cfg = load_config(target, "target")
    shape = moe_shape(t_cfg, target, "target")
    vocab = vocab_size(t_cfg)
    if draft is not None:
        d_vocab = vocab_size(load_config(draft, "draft"))
        if d_vocab != vocab:
            raise TraceError(draft, "draft", f"vocabulary size {d_vocab} differs from the target's {vocab}; "
                                             "draft and target must share one vocabulary")
    return shape, vocab


def resolve_device(name: str) -> str:
    """``cpu`` / ``cuda`` / ``cuda:N`` / ``auto``; empty means cuda when present, else cpu."""
    if not name:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return name
    if name == "auto":
        if not _has_accelerate():
            raise TraceError(name, "device", "device=auto (device_map) needs `pip install accelerate`")
        return name
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise TraceError(name, "device", "CUDA is not available on this machine (use device=cpu)")
        return name
    raise TraceError(name, "device", "choose cpu, cuda, cuda:N or auto")


def text_encoder(tokenizer, chat: bool):
    """``encode(text) -> ids``: the chat template (when ``chat`` and the tokenizer has one), then ids."""
    def encode(text: str) -> list[int]:
        if chat and getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                                 add_generation_prompt=True, tokenize=False)
            return list(tokenizer(text, add_special_tokens=False)["input_ids"])
        return list(tokenizer(text)["input_ids"])
    return encode


def eos_ids(model, tokenizer=None) -> list[int]:
    """End-of-sequence ids from the model's generation config, else the tokenizer's."""
    gen = getattr(model, "generation_config", None)
    eos = getattr(gen, "eos_token_id", None)
    if eos is None and tokenizer is not None:
        eos = tokenizer.eos_token_id
    if eos is None:
        return []
    return [int(eos)] if isinstance(eos, int) else [int(e) for e in eos]


class CaptureModels:
    """The target, optional draft and tokenizer of a capture: checked at once, weights loaded later.

    Construction reads only configs, so naming, MoE, vocabulary and device problems surface before
    :meth:`load` spends minutes on weights; the tokenizer loads on the first text prompt.
    """

    def __init__(self, target: str, draft: str | None, tokenizer: str | None, dtype: str,
                 device: str, seed: int = 0, chat: bool = True):
        self.names = {"target": target, "draft": draft}
        self.device = resolve_device(device)
        self.precision = dtype if dtype != "auto" else ("float32" if self.device == "cpu" else "bfloat16")
        self.dtype, self.seed, self.chat = resolve_dtype(self.precision), seed, chat
        self.shape, self.vocab = check_pair(target, draft)
        self._tok_name = tokenizer or (None if is_tiny(target) else target)
        self._tokenizer = self._encode = None
        self.target = self.draft = None

    def encode(self, text: str) -> list[int]:
        """Token ids of a text prompt (``TraceError`` without a tokenizer or on bad ids)."""
        if self._encode is None:
            if self._tok_name is None:
                raise TraceError(self.names["target"], "tokenizer", "tiny models have no tokenizer: use "
                                                                     "prompts=tiny:N or pass tokenizer=PATH")
            self._tokenizer = load_tokenizer(self._tok_name)
            self._encode = text_encoder(self._tokenizer, self.chat)
        ids = self._encode(text)
        if not ids:
            raise TraceError(text[:40], "prompts", "a prompt encodes to no tokens")
        if max(ids) >= self.vocab:
            raise TraceError(self._tok_name, "tokenizer",
                             f"produces id {max(ids)}, beyond the model's vocabulary of {self.vocab}")
        return ids

    def load(self) -> None:
        """Load the weights (target, then draft on the same device) in eval mode."""
        self.target = load_model(self.names["target"], self.dtype, self.device, self.seed)
        if self.names["draft"] is not None:
            device = self.device if self.device != "auto" else self.target.device
            self.draft = load_model(self.names["draft"], self.dtype, str(device), self.seed)

    def eos(self) -> list[int]:
        """End-of-sequence ids of the loaded target (its generation config, else the tokenizer's)."""
        return eos_ids(self.target, self._tokenizer)


def normalize_device(name) -> torch.device:
    """A torch device with its index (``cuda`` becomes ``cuda:<current>``: threads and streams need it)."""
    device = torch.device(name)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device
