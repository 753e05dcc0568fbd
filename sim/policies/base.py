"""The policy protocol: pure decision objects called by both executors.

An executor (the SimPy engine in :mod:`sim.engine`, the live PyTorch engine in :mod:`real`) owns
time and moves bytes. A policy owns decisions and never reads a clock, never imports SimPy or
torch, and holds no global state; it is deterministic given ``ctx.seed``.

The executor calls, for every decode step::

    choose_gamma(step) -> int                  # only when adaptive_gamma: drafts of this step
    on_step_start(step, signals, cache)        # draft phase begins (SD) / token begins (AR)
    for layer in range(L):
        on_layer_start(layer, cache)           # e.g. pin resident experts, drop stale queue entries
        place(layer, counts, signals, cache)   # after the router: where each requested expert runs
        on_layer_end(layer, counts, cache)     # update utilities, enqueue prefetches
    on_step_end(step, n_verified, accepted)    # the verify result of the step
    # whenever the PCIe link is idle and no demand fetch waits:
    next_transfer(cache) -> (layer, expert) | None
    # whenever a transfer needs a slot and none is free:
    victim(layer, expert, cache) -> (layer, expert) | None
    on_transfer_done(layer, expert, cache)

``counts[e]`` is the number of verified tokens (1 in AR decoding, up to gamma+1 in SD) that chose
expert ``e`` at this layer. The executor mutates the :class:`sim.expert_cache.ExpertCache`; a
policy only reads it.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field

import numpy as np

# Where a requested expert runs (values of Placement.where)
GPU = 0     # resident in a VRAM slot: computed by the GPU
CPU = 1     # computed by the CPU from host memory
FETCH = 2   # demand fetch over PCIe into a slot, then computed by the GPU
STREAM = 3  # computed by the GPU reading the weights over PCIe (UVA), no slot used
WHERE_NAMES = {GPU: "gpu", CPU: "cpu", FETCH: "fetch", STREAM: "stream"}


@dataclass(frozen=True)
class CostTable:
    """The cost model's numbers a policy may use to decide (seconds; pure data, no clock).

    ``gpu_expert_s[n]`` / ``cpu_expert_s[n]``: time for one expert with ``n`` tokens routed to it
    (index 0..len-1; beyond the end, extrapolate linearly from the last two entries).
    """

    gpu_expert_s: np.ndarray
    cpu_expert_s: np.ndarray
    transfer_s: float          # one expert host->device over PCIe
    layer_fixed_s: float       # non-expert GPU time of one layer (attention, router, shared experts)
    draft_phase_s: float       # the whole draft phase before a verify pass (0 in AR)
    expert_bytes: int
    step_fixed_s: float = 0.0  # per target forward outside the MoE layers (embeddings, lm_head, host)

    @staticmethod
    def _lookup(table: np.ndarray, n: np.ndarray | int) -> np.ndarray:
        n = np.asarray(n)
        last = len(table) - 1
        slope = table[last] - table[last - 1] if last >= 1 else 0.0
        inside = table[np.minimum(n, last)]
        return np.where(n <= last, inside, table[last] + (n - last) * slope)

    def gpu(self, n):
        """GPU time of one expert with ``n`` tokens (vectorised over ``n``)."""
        return self._lookup(self.gpu_expert_s, n)

    def cpu(self, n):
        """CPU time of one expert with ``n`` tokens (vectorised over ``n``)."""
        return self._lookup(self.cpu_expert_s, n)


@dataclass(frozen=True)
class PolicyContext:
    """Everything a policy learns at :meth:`Policy.reset`: shapes, budget and costs (pure data).

    ``profile`` is per-(layer, expert) popularity from a separate profiling trace (what Fiddler and
    kTransformers measure offline); ``future_counts`` ([S, L, E], the verify counts of every step
    of the run) is given only to policies with ``needs_future = True`` (the oracle).
    """

    n_layers: int
    n_experts: int
    top_k: int
    n_slots: int
    gamma: int                 # 0 = autoregressive decoding
    costs: CostTable
    seed: int = 0
    profile: np.ndarray | None = None
    future_counts: np.ndarray | None = None


@dataclass
class Signals:
    """Predictions the executor supplies from the trace (or a predictor model of stated accuracy).

    ``draft_pred[l]``: per-expert token counts for layer ``l`` of the coming verify pass, predicted
    from the draft model (given at step start; SP-MoE). ``next_pred``: predicted counts for layer
    ``layer+1`` from this layer's hidden state (given at :meth:`Policy.place`; MixtralOffload, Fate,
    HybriMoE). Either may be None when the executor has no such signal.
    """

    draft_pred: np.ndarray | None = None   # [L, E]
    next_pred: np.ndarray | None = None    # [E]
    router_scores: np.ndarray | None = None  # [E] mean gate weight of this layer (HybriMoE)


@dataclass
class Placement:
    """A policy's answer at one layer: where each requested expert runs.

    ``where[e]`` is one of GPU/CPU/FETCH/STREAM for every expert with ``counts[e] > 0`` (entries of
    unrequested experts are ignored). ``extra_fetch`` lists experts of this layer to fetch as demand
    although no token requested them (whole-layer offload, as Accelerate does). ``gpu_first`` is the
    ``bulk`` moves all of this layer's demand fetches (FETCH and ``extra_fetch``) as one copy: one
    latency, then all the bytes, landing together (a whole module copied at once, as Accelerate's
    offload hook does). Otherwise each demand fetch is its own transfer and the GPU computes each
    fetched expert as soon as it lands.
    """

    where: np.ndarray
    extra_fetch: list[int] = field(default_factory=list)
    bulk: bool = False


class Policy(abc.ABC):
    """Base class with do-nothing hooks. Subclasses override what they decide.

    Class attributes: ``name`` (registry key), ``speculative`` (runs speculative decoding: the
    executor uses the run's gamma; otherwise gamma is 0), ``overlap`` (prefetches overlap compute;
    False makes the executor finish every queued prefetch before it goes on), ``needs_future``
    (gets ``ctx.future_counts``: the oracle), ``needs_profile`` (gets ``ctx.profile``: static
    placement from an offline profile). Optional: ``next_layer_accuracy`` / ``draft_accuracy`` (the
    accuracy of the predictor the executor simulates when the trace carries no prediction) and
    ``cpu_efficiency_scale`` (the CPU kernels' speed relative to llama.cpp's).
    """

    name = "base"
    speculative = False
    overlap = True
    needs_future = False
    needs_profile = False
    adaptive_gamma = False     # True: the executor asks choose_gamma(step) before every step
    draft_extra_decodes = 0    # draft forwards per step beyond gamma (llama.cpp's speculative loop: 1)

    def reset(self, ctx: PolicyContext, cache) -> None:
        self.ctx = ctx

    def initial_residency(self) -> list[tuple[int, int]]:
        """Experts loaded into slots before decoding starts (static placement); at most n_slots."""
        return []

    def on_step_start(self, step: int, signals: Signals, cache) -> None:
        pass

    def on_layer_start(self, layer: int, cache) -> None:
        pass

    def choose_gamma(self, step: int) -> int:
        """Drafts for ``step`` (asked before ``on_step_start`` when ``adaptive_gamma``; 0..ctx.gamma)."""
        return self.ctx.gamma

    def on_step_end(self, step: int, n_verified: int, accepted: int) -> None:
        """The step verified ``n_verified`` positions and accepted ``accepted`` drafts."""

    @abc.abstractmethod
    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        """Where each requested expert of ``layer`` runs (every concrete policy decides this)."""

    def on_layer_end(self, layer: int, counts: np.ndarray, cache) -> None:
        pass

    def next_transfer(self, cache) -> tuple[int, int] | None:
        return None

    def victim(self, layer: int, expert: int, cache) -> tuple[int, int] | None:
        return None

    def on_transfer_done(self, layer: int, expert: int, cache) -> None:
        pass

    # Optional block-copy hooks (``Placement.bulk``); without them the executor calls victim() and
    # on_transfer_done() once per expert:
    #   victims(layer, n, cache) -> list[(layer, expert)]   up to n victims, in eviction order
    #   on_transfers_done(layer, experts, cache)            several experts of a layer landed

    def metrics(self) -> dict[str, float]:
        """Extra numbers for the result row (e.g. MoE-SpAc's hot/cold precision)."""
        return {}

    def slot_request(self, n_layers: int, n_experts: int) -> int | None:
        """Expert slots an engine knob of this policy asks for (llama.cpp ``--n-cpu-moe``,
        kTransformers' GPU experts), read by the runner before the memory plan; None: the run's
        ``cache_ratio`` / ``slots_per_layer`` decide."""
        return None


def resident_or(cache, layer: int, counts: np.ndarray, otherwise: int) -> np.ndarray:
    """``where`` array: GPU for requested experts resident in ``layer``, ``otherwise`` for the rest."""
    return np.where(cache.resident[layer], GPU, otherwise).astype(np.int8)
