"""The live executor: the simulator's protocol points, slots and transfers on real hardware.

:class:`OffloadExecutor` is to :mod:`real` what :class:`sim.engine.decode.Engine` is to :mod:`sim`: it
owns time (threads, streams), mutates the :class:`sim.protocol.expert_cache.ExpertCache`, and asks the
policy at the same points in the same order:

* step start (the draft phase begins): ``on_step_start``, wake the copy engine, and with a
  blocking policy (``overlap = False``, or ``sync=true``) move every queued prefetch now;
* each MoE layer of the verify forward: pin + ``on_layer_start`` (pre-hook on the decoder layer),
  ``place`` after the router with the window's per-expert counts, dispatch and compute
  (:mod:`real.offload.layer`), unpin + ``on_layer_end``, wake, and drain when blocking;
* the copy engine, whenever idle, asks for ``next_transfer``; a transfer that finds no free slot
  asks for a ``victim``; a landed copy calls ``on_transfer_done``.

Slot reservation, placements, eviction and landing are :class:`sim.protocol.ProtocolCore`'s, the
code the simulator runs; this executor only adds threads, buffers and copies. Policy calls and
cache changes happen under one lock (the copy engine's thread calls the policy too), so the policy always sees a consistent
cache. The prompt's prefill and the final forward run "bypass": experts straight from host
weights, no policy, nothing counted (the simulator does not model them either).
"""
from __future__ import annotations

import threading
import time

import numpy as np
import torch

from real.offload import layer as layer_run
from real.offload.copier import CopyEngine, Faults, Transfer
from real.offload.cpu_tier import CpuTier
from real.offload.signals import RealSignals
from real.offload.slots import SlotPool
from real.offload.timed_policy import TimedPolicy
from real.offload.transfers import PoolSlots, TransferMixin
from sim.protocol.expert_cache import ExpertCache
from sim.protocol.metrics import Counters
from sim.protocol import ProtocolCore


class OffloadExecutor(TransferMixin):
    """Offloaded execution of one model's experts (``host``) on ``device`` for one policy at a time.

    ``acts[l]`` / ``gates[l]`` are MoE layer ``l``'s activation and router modules. Call
    :meth:`begin` before each prompt and :meth:`finish` after it; the decoder
    (:mod:`real.offload.decoder`) calls the protocol points.
    """

    def __init__(self, host, acts: list, gates: list, device: torch.device, cpu_workers: int = 1,
                 faults: Faults | None = None, api=None):
        from real.model_loading import normalize_device
        from real.offload.device_api import device_api
        self.host, self.acts, self.gates, self.device = host, acts, gates, normalize_device(device)
        self.api = api if api is not None else device_api(self.device)   # None: the CPU path
        self.cpu = CpuTier(cpu_workers)
        self.faults = faults or Faults()
        self.lock = threading.RLock()
        self.pool: SlotPool | None = None
        self.copier: CopyEngine | None = None
        self.active = False      # a verify forward is running: the policy decides
        self.decoding = False
        self.prefill = None      # real.offload.prefill.RealPrefill: the prompt's forward follows its rule
        self.prefilling = False  # the prompt's forward is running

    # --- lifecycle -------------------------------------------------------------------------
    def begin(self, policy, ctx, sync: bool = False) -> None:
        """Fresh cache, slots and counters for one prompt; ``policy.reset`` and its initial residency."""
        if ctx.n_layers != self.host.n_layers or ctx.n_experts != self.host.n_experts:
            raise ValueError(f"context has {ctx.n_layers}x{ctx.n_experts} experts, the model "
                             f"{self.host.n_layers}x{self.host.n_experts}")
        self._new_pool(ctx.n_slots)
        self.policy = TimedPolicy(policy)
        if sync:
            self.policy.overlap = False
        self.overlap = bool(policy.overlap)
        self.cache = ExpertCache(ctx.n_layers, ctx.n_experts, ctx.n_slots)
        self.core = ProtocolCore(self.policy, self.cache, expert_bytes=self.host.expert_bytes,
                                 gpu_tab=ctx.costs.gpu_expert_s, cpu_tab=ctx.costs.cpu_expert_s,
                                 slots=PoolSlots(self.pool))
        self.c: Counters = self.core.c
        self.wait_s = 0.0
        self.jobs: dict[tuple[int, int], Transfer] = {}
        self.policy_s: list[float] = []
        self.last_window = self.window = None
        self.cpu.busy_s = 0.0
        with self.lock:
            self.policy.reset(ctx, self.cache)
            self._load_initial(self.core.load_initial())
        self.policy.take()
        self.copier.prefetch_enabled = self.overlap
        self.active = self.decoding = False
        self.copier.wake()   # as the simulator's link, which asks for a prefetch as soon as it starts

    def _new_pool(self, n_slots: int) -> None:
        if self.copier is not None:
            self.pause()
        if self.pool is not None and self.pool.n_slots == n_slots:
            self.pool.clear()
            return
        if self.copier is not None:
            self.copier.close()
        self.pool = SlotPool(n_slots, self.host.expert_shapes, self.host.dtype, self.device, self.api)
        self.copier = CopyEngine(self.host, self.pool, self.start_prefetch, self.transfer_landed, self.faults)

    @property
    def failed(self) -> int:
        """Copies that failed in this prompt."""
        return self.core.failed

    def _load_initial(self, experts) -> None:
        """Static placement before decoding (the core loaded it): copied now, costing no decode time."""
        api = self.api
        for layer, expert in experts:
            slot = self.pool.slot((layer, expert))
            for dst, src in zip(self.pool.buffers(("slot", slot)), self.host.expert(layer, expert)):
                if api is not None:
                    api.copy_async(dst, src)
                else:
                    dst.copy_(src)
        if api is not None:
            api.device_sync()

    def land_prefill(self) -> None:
        """The prompt's copies handed to the decode's cache as the simulator hands them over
        (:func:`sim.prefill.handoff.land_prefill_copies`: a caching policy's own victims, fewest
        tokens first), then their bytes written into the slots they got; before the first step."""
        if self.prefill is None or not self.prefill.last_copied:
            return
        from sim.prefill.handoff import land_prefill_copies

        with self.lock:
            before = self.cache.resident.copy()
            land_prefill_copies(self.core, self.prefill.last_copied)
            self._load_initial([(int(l), int(e)) for l, e in zip(*np.nonzero(self.cache.resident & ~before))])

    def pause(self) -> None:
        """Stop prefetching and wait until every transfer in flight has landed."""
        self.copier.prefetch_enabled = False
        while not (self.copier.idle() and not self.jobs):
            self.copier.raise_error()
            time.sleep(0.0005)

    def finish(self) -> Counters:
        """End of a prompt: transfers settle; the counters (``gpu_busy_s`` estimated, see below)."""
        self.pause()
        self.decoding = False
        c = self.c
        c.decode_s = float(sum(c.step_s))
        c.cpu_busy_s = self.cpu.busy_s
        # The device is taken as busy whenever the host is not blocked on the CPU tier or a
        # transfer (an estimate: kernels are asynchronous; exact busy time needs a profiler).
        c.gpu_busy_s = max(0.0, c.decode_s - self.wait_s)
        return c

    def close(self) -> None:
        """Stop the copy engine and the CPU tier (end of the run)."""
        if self.copier is not None:
            self.copier.close()
        self.cpu.close()

    # --- protocol points (main thread) -----------------------------------------------------------
    def step_start(self, step: int) -> None:
        """The draft phase of ``step`` begins."""
        self.decoding = True
        E = self.host.n_experts
        with self.lock:
            self.signals = RealSignals(self.gates, E, self.last_window)
            self.window = np.zeros((self.host.n_layers, E), dtype=np.int64)
            self.core.step_start(step, self.signals)
        self.copier.wake()
        if not self.overlap:
            self.drain()

    def choose_gamma(self, step: int, gamma: int) -> int:
        """Drafts of ``step`` (before its draft phase): the policy's choice through the core when it
        chooses (``adaptive_gamma``, checked against 0..``gamma``), else ``gamma``."""
        with self.lock:
            g = self.core.step_gamma(step, gamma)
        return gamma if g is None else g

    def step_end(self, seconds: float, produced: int, n_verified: int = 0, accepted: int = 0) -> None:
        """Step bookkeeping (wall time, tokens, the policy's share) and the verify result."""
        self.c.step_s.append(seconds)
        self.c.tokens += produced
        self.c.steps += 1
        self.last_window = self.window
        with self.lock:
            self.core.step_end(self.c.steps - 1, n_verified, accepted)
            self.policy_s.append(self.policy.take())

    def layer_start(self, layer: int) -> None:
        """Pre-hook of MoE layer ``layer`` (before its attention): pin and ``on_layer_start``."""
        if not self.active:
            return
        self._t_layer = time.perf_counter()
        with self.lock:
            self.core.layer_start(layer)

    def experts_forward(self, layer: int, module, hidden, top_k_index, top_k_weights):
        """The ``slot_offload`` experts implementation of MoE layer ``layer``."""
        if not self.active:
            if self.prefilling and self.prefill is not None:
                from real.offload.prefill import prefill_layer
                return prefill_layer(self, self.prefill, layer, hidden, top_k_index, top_k_weights)
            return layer_run.bypass(self, layer, module, hidden, top_k_index, top_k_weights)
        return layer_run.run(self, layer, module, hidden, top_k_index, top_k_weights)

    def layer_end(self, layer: int, counts: np.ndarray) -> None:
        """After the layer's experts joined: unpin, ``on_layer_end``, wake, drain when blocking."""
        self.window[layer] = counts
        with self.lock:
            self.core.layer_end(layer, counts)
        self.copier.wake()
        if not self.overlap:
            self.drain()
        self.c.layer_s.append(time.perf_counter() - self._t_layer)
