"""The policy protocol: pure decision objects called by both executors.

An executor (the SimPy engine in :mod:`sim.engine.decode`, the live PyTorch engine in :mod:`real`) owns
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
    # whenever a transfer needs a slot and none is free (demand: a layer waits for it):
    victim(layer, expert, cache, demand) -> (layer, expert) | None
    victims(layer, n, cache) -> [(layer, expert), ...] | None      # a block copy (Placement.bulk)
    on_transfer_done(layer, expert, cache) / on_transfers_done(layer, experts, cache)

``counts[e]`` is the number of verified tokens (1 in AR decoding, up to gamma+1 in SD) that chose
expert ``e`` at this layer. The executor mutates the :class:`sim.protocol.expert_cache.ExpertCache`; a
policy only reads it. The bookkeeping around these calls is :class:`sim.protocol.ProtocolCore`,
shared by every executor; every hook and attribute an executor reads is declared below with its
default.
"""
from __future__ import annotations

import abc
import inspect
from dataclasses import dataclass, field, fields

import numpy as np

from sim.machine.cost_table import CostTable

# Where a requested expert runs (values of Placement.where)
GPU = 0     # resident in a VRAM slot: computed by the GPU
CPU = 1     # computed by the CPU from host memory
FETCH = 2   # demand fetch over PCIe into a slot, then computed by the GPU
STREAM = 3  # computed by the GPU reading the weights over PCIe (UVA), no slot used

# Predictor accuracies an executor simulates when the trace records no prediction and the policy
# states none: next-layer gate prediction about 0.9 (Fate reports ~97% with cross-layer gate
# inputs, an MLP predictor on Mixtral reaches 73% top-2: docs/sources.md); draft-based prediction
# 0.88 (SP-MoE top-1 expert prediction 88-89%, source S3 in docs/sources.md).
NEXT_LAYER_ACCURACY = 0.90
DRAFT_ACCURACY = 0.88


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
    although no token requested them (whole-layer offload, as Accelerate does; a list or an int
    array). ``bulk=True`` moves all of this layer's demand fetches (FETCH and ``extra_fetch``) as
    one copy: one latency, then all the bytes, landing together (a whole module copied at once, as
    Accelerate's offload hook does). Otherwise each demand fetch is its own transfer and the GPU computes each fetched expert
    as soon as it lands. STREAM copies the expert into a staging buffer over the link (no cache
    slot) and the GPU computes it once landed.
    """

    where: np.ndarray
    extra_fetch: list[int] | np.ndarray = field(default_factory=list)
    bulk: bool = False


class Policy(abc.ABC):
    """Base class with do-nothing hooks. Subclasses override what they decide.

    Class attributes (an executor reads exactly these): ``name`` (registry key), ``speculative``
    (runs speculative decoding: the executor uses the run's gamma; otherwise gamma is 0),
    ``overlap`` (prefetches overlap compute; False makes the executor finish every queued prefetch
    before it goes on), ``needs_future`` (gets ``ctx.future_counts``: the oracle),
    ``needs_profile`` (gets ``ctx.profile``: static placement from an offline profile),
    ``next_layer_accuracy`` / ``draft_accuracy`` (the accuracy of the predictor the executor
    simulates when the trace carries no prediction) and ``cpu_efficiency_scale`` (the CPU
    kernels' speed relative to llama.cpp's; the cost model multiplies the CPU's rates by it).
    ``cpu_layers``: MoE layers computed whole on the CPU, attention included (llama.cpp ``-ngl``);
    ``output_on_cpu``: the output layer (lm_head) too. Both are fixed once :meth:`reset` returns.
    ``adaptive_gamma``: the policy chooses each step's draft length (:meth:`choose_gamma`, asked
    through the protocol core before every step; the run is set up for :meth:`run_gamma`);
    ``draft_extra_decodes``: draft forwards per drafting step beyond its drafts (llama.cpp's
    ``examples/speculative`` loop decodes the target's corrected token first: 1).
    ``deferred_experts``: in a one-token forward, up to this many of a layer's CPU experts are
    computed while the next layer's attention runs (kTransformers' Expert Deferral); 0: none.
    """

    name = "base"
    speculative = False
    overlap = True
    needs_future = False
    needs_profile = False
    next_layer_accuracy = NEXT_LAYER_ACCURACY
    deferred_experts = 0
    draft_accuracy = DRAFT_ACCURACY
    cpu_efficiency_scale = 1.0
    cpu_layers: frozenset = frozenset()
    output_on_cpu = False
    adaptive_gamma = False
    draft_extra_decodes = 0
    Params = None   # a policy with many parameters takes one frozen dataclass of them (``Params``)

    @classmethod
    def from_params(cls, **params) -> "Policy":
        """The policy built from its parameters by name (``cls(cls.Params(**params))`` where the
        policy declares :attr:`Params`): how presets and tests build one."""
        return cls(cls.Params(**params)) if cls.Params is not None else cls(**params)

    @classmethod
    def parameter_names(cls) -> set:
        """The names :meth:`from_params` accepts."""
        if cls.Params is not None:
            return {f.name for f in fields(cls.Params)}
        sig = inspect.signature(cls.__init__).parameters
        return {p for p in sig if p != "self" and sig[p].kind not in (inspect.Parameter.VAR_KEYWORD,
                                                                     inspect.Parameter.VAR_POSITIONAL)}

    def reset(self, ctx: PolicyContext, cache) -> None:
        """A new run begins: shapes, budget and costs (called before anything else)."""
        self.ctx = ctx

    def initial_residency(self) -> list[tuple[int, int]]:
        """Experts loaded into slots before decoding starts (static placement); at most n_slots."""
        return []

    def on_step_start(self, step: int, signals: Signals, cache) -> None:
        """The draft phase of ``step`` begins (SD) / the token begins (AR); may enqueue prefetches."""

    def on_layer_start(self, layer: int, cache) -> None:
        """``layer`` starts computing (the executor has pinned it)."""

    def run_gamma(self, gamma: int) -> int:
        """The draft length a run of this policy is set up for, given the run's ``gamma``: that gamma
        when speculative, 0 otherwise; a policy with ``adaptive_gamma`` returns its largest choice."""
        return int(gamma) if self.speculative else 0

    def choose_gamma(self, step: int) -> int:
        """Drafts for ``step`` (asked before ``on_step_start`` when ``adaptive_gamma``; 0..ctx.gamma)."""
        return self.ctx.gamma

    def on_step_end(self, step: int, n_verified: int, accepted: int) -> None:
        """The step verified ``n_verified`` positions and accepted ``accepted`` drafts."""

    @abc.abstractmethod
    def place(self, layer: int, counts: np.ndarray, signals: Signals, cache) -> Placement:
        """Where each requested expert of ``layer`` runs (every concrete policy decides this)."""

    def on_layer_end(self, layer: int, counts: np.ndarray, cache) -> None:
        """``layer`` finished (unpinned); update utilities, enqueue prefetches."""

    def next_transfer(self, cache) -> tuple[int, int] | None:
        """The link is idle and no demand fetch waits: the next expert to prefetch, or None."""
        return None

    def victim(self, layer: int, expert: int, cache, demand: bool) -> tuple[int, int] | None:
        """A transfer of (layer, expert) needs a slot and none is free: the expert to evict, or None
        (then a demand fetch runs on the CPU and a prefetch is dropped). ``demand`` is True when a
        layer waits for the transfer (a FETCH or ``extra_fetch``), False for a prefetch."""
        return None

    @classmethod
    def prefetches(cls) -> bool:
        """Whether the policy may queue prefetches (it overrides :meth:`next_transfer`)."""
        return cls.next_transfer is not Policy.next_transfer

    @classmethod
    def evicts(cls) -> bool:
        """Whether the policy keeps an expert cache it evicts from (it overrides :meth:`victim`)."""
        return cls.victim is not Policy.victim

    def victims(self, layer: int, n: int, cache) -> list[tuple[int, int]] | None:
        """A block copy (``Placement.bulk``) of ``layer`` is ``n`` slots short: up to ``n`` victims
        at once, in eviction order. None (the default): ask :meth:`victim` once per expert."""
        return None

    def plan_prefetches(self, cache, n_land: int) -> list[tuple[int, int, tuple | None]]:
        """A whole coalesced prefetch run at once (optional; the executor otherwise asks
        :meth:`next_transfer` and :meth:`victim` once per copy): ``[(layer, expert, victim or
        None), ...]``, the picks and victims the per-copy calls would give on an idle link when
        the first ``n_land`` picks land one after another (each told by :meth:`on_transfer_done`)
        and one more is started -- at most ``n_land + 1`` entries, fewer when the policy runs out.
        The policy updates its own state as those calls would (the landed picks included); the
        cache is not touched: it reads the cache as it was before the run, and the executor then
        evicts, reserves and lands in the order given."""
        raise NotImplementedError

    def on_transfer_done(self, layer: int, expert: int, cache) -> None:
        """A transfer of (layer, expert) landed: it is resident now."""

    def on_transfers_done(self, layer: int, experts: list[int], cache) -> None:
        """A block copy of several experts of ``layer`` landed together (default: once per expert)."""
        for e in experts:
            self.on_transfer_done(layer, e, cache)

    def metrics(self) -> dict[str, float]:
        """Extra numbers for the result row (e.g. MoE-SpAc's hot/cold precision)."""
        return {}

    def cpu_layer_count(self, n_layers: int) -> int:
        """MoE layers this policy computes whole on the CPU (llama.cpp ``-ngl``), read by the runner
        before the memory plan: their attention and router weights stay in host DRAM."""
        return 0

    def output_layer_on_cpu(self, n_layers: int) -> bool:
        """Whether the output layer (lm_head) runs on the CPU (llama.cpp ``-ngl N`` with N at most
        the layer count), known before :meth:`reset` so the run's cost model can be built first;
        :meth:`reset` sets ``output_on_cpu`` to it."""
        return self.output_on_cpu

    def slot_request(self, n_layers: int, n_experts: int) -> int | None:
        """Expert slots an engine knob of this policy asks for (llama.cpp ``--n-cpu-moe``,
        kTransformers' GPU experts), read by the runner before the memory plan; None: the run's
        ``cache_ratio`` / ``slots_per_layer`` decide."""
        return None
