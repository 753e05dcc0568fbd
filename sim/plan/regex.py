"""Regular expressions that name sets of layers, for llama.cpp ``-ot`` and kTransformers' optimize rules.

llama.cpp's ``-ot <pattern>=<buffer type>`` is searched (``std::regex_search``) in each GGUF tensor
name, the first matching pattern wins (llama.cpp ``common/arg.cpp``, ``src/llama-model.cpp``); a
routed expert tensor is named ``blk.<block>.ffn_{up,gate,down}_exps.weight`` (``gate_up`` when fused;
gguf-py ``constants.py`` ``MODEL_TENSOR.FFN_*_EXP``). kTransformers matches module names such as
``model.layers.<i>.mlp.experts`` against ``name`` with ``re.match`` (kvcache-ai/ktransformers
``ktransformers/optimize/optimize.py``). Both number blocks from the first layer, dense ones included.
"""
from __future__ import annotations


def _digits(lo: int, hi: int) -> str:
    """One digit position holding ``lo..hi`` (0..9)."""
    if lo == hi:
        return str(lo)
    return f"[{lo}{hi}]" if hi == lo + 1 else f"[{lo}-{hi}]"


def int_range(lo: int, hi: int) -> list[str]:
    """Alternatives that match exactly the decimal integers ``lo..hi`` (no leading zeros), fully.

    Within one decade the last digit is a class (``3[3-9]``); whole decades recurse on the tens
    (``[12][0-9]``); so ``33..47`` is ``3[3-9]|4[0-7]`` and ``0..32`` is ``[0-9]|[12][0-9]|3[0-2]``.
    """
    if not 0 <= lo <= hi:
        raise ValueError(f"int_range: need 0 <= lo <= hi, got {lo}..{hi}")
    out = []
    while lo <= hi:
        if lo % 10 == 0 and lo + 9 <= hi:
            top = (hi + 1) // 10 - 1              # the last whole decade inside lo..hi
            first = lo // 10
            if first == 0:
                out.append("[0-9]")
                first = 1
            if first <= top:
                out += [f"{t}[0-9]" for t in int_range(first, top)]
            lo = (top + 1) * 10
        else:
            end = min(hi, lo - lo % 10 + 9)
            head = str(lo // 10) if lo >= 10 else ""
            out.append(head + _digits(lo % 10, end % 10))
            lo = end + 1
    return out


def runs(values) -> list[tuple[int, int]]:
    """Sorted distinct ``values`` as maximal runs of consecutive integers ``(first, last)``."""
    out: list[list[int]] = []
    for v in sorted(set(int(x) for x in values)):
        if out and v == out[-1][1] + 1:
            out[-1][1] = v
        else:
            out.append([v, v])
    return [(a, b) for a, b in out]


def any_of(values) -> str:
    """A group matching exactly the integers in ``values`` (a non-empty set), e.g. ``(3[3-9]|4[0-7])``."""
    alts = [a for lo, hi in runs(values) for a in int_range(lo, hi)]
    if not alts:
        raise ValueError("any_of: no values")
    return "(" + "|".join(alts) + ")"


def expert_tensors(blocks) -> str:
    """The ``-ot`` tensor pattern of the routed-expert tensors of ``blocks``."""
    return "blk\\." + any_of(blocks) + "\\.ffn_.*_exps\\."


def expert_modules(blocks) -> str:
    """The kTransformers ``match: name`` pattern of the expert modules of ``blocks``."""
    return "^model\\.layers\\." + any_of(blocks) + "\\.mlp\\.experts$"
