"""The CUDA primary context's device memory, which grows with the GPU's SM count.

Creating a CUDA context (the first ``cudaSetDevice`` / ``cudaMemGetInfo`` of a process) takes device
memory the process never gets back. ggml-org/llama.cpp PR #23604 ("cuda: read memory through NVML if
available", comment of 2026-05-24) measured it with a plain ``cudaMemGetInfo``: 107 MiB on an RTX 4060 Ti
(Ada, 34 SMs) and 555 MiB on an RTX PRO 6000 Blackwell (188 SMs), "so the cost scales with SM count";
PR #20595 gives the same range ("120-550 MB depending on GPU"). Much of it is per-SM state the driver
reserves up front, e.g. the local-memory (stack) backing of every resident thread: 216 MB on a 108-SM
A100 (arcs-skku/EMDC_llvm issue 13). The context here is the line through the two PR #23604 points:
about 2.9 MiB per SM plus about 8 MiB.
"""
from __future__ import annotations

MIB = 2 ** 20
_POINTS = ((34, 107.0), (188, 555.0))      # (SMs, MiB) measured in PR #23604
PER_SM_MIB = (_POINTS[1][1] - _POINTS[0][1]) / (_POINTS[1][0] - _POINTS[0][0])   # 448 / 154 = 2.909
BASE_MIB = _POINTS[0][1] - _POINTS[0][0] * PER_SM_MIB                           # 8.09


def cuda_context_bytes(sms: int) -> float:
    """Device bytes of the CUDA primary context of a GPU with ``sms`` streaming multiprocessors."""
    if int(sms) < 1:
        from sim.machine.specs import ConfigError
        raise ConfigError(f"sms={sms!r}: the GPU's SM count must be an integer >= 1")
    return (BASE_MIB + PER_SM_MIB * int(sms)) * MIB
