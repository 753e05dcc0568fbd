"""Where a CPU's expert weights sit, and what that leaves its threads: multi-socket NUMA placement
and per-chiplet (CCD) read links.

A multi-socket host (``sockets > 1``) reads a page at its own node's DRAM rate from the socket
that owns it and across the socket link (UPI / xGMI, ``cross_socket_gbs`` per direction) from the
other sockets, with the extra hop on every load (``remote_latency_ns`` against ``mem_latency_ns``).
Three placements of the weights (``numa_placement`` of a runtime):

- ``replicate``: a copy per node, each socket reads its own (kTransformers' NUMA build;
  ``numa_aware``): every node's DRAM, local latency.
- ``interleave``: pages spread evenly over the nodes (llama.cpp ``--numa distribute`` / ``numactl
  --interleave``): every node's DRAM, but ``(S-1)/S`` of each thread's lines cross a link (each
  ordered pair of sockets carries ``1/S^2`` of the total), so the links cap the total at
  ``S^2 x cross_socket_gbs`` (4 x the per-direction rate for two sockets), and each thread's loads
  see the mean of the local and remote latencies.
- ``first_touch``: every page on the node of the thread that faulted it in, i.e. the loading
  thread's (llama.cpp's default without ``--numa``: its mmap of the model file is read into the page
  cache by one thread; llama.cpp README "NUMA support", ``--numa`` help text): one node's DRAM serves
  all threads, the other sockets' threads read through their link (``S x cross_socket_gbs`` in
  all) at the remote latency.

ggml splits a matmul's rows statically over its threads (a cyclic chunk assignment; ggml-org/
llama.cpp PR #25048 describes it; ``mul_mat_id`` gained chunking only in PR #11666, Feb 2025), so
the slowest thread sets the time: with threads on every socket the per-core rate by Little's law
(:func:`sim.machine.compose.core_bandwidth`) is taken at the slowest thread's latency, not the local
one. That is the per-core limit the composition already has, at a different latency, so nothing is
counted twice.

Chiplet CPUs (AMD EPYC / Ryzen) read DRAM through one Infinity Fabric link per CCD (GMI, a fixed
read width per fabric clock: 32 B/clock on Zen 2-4, AMD "EPYC 9004 Series Architecture Overview"):
``ccds x ccd_read_gbs`` caps what all cores can read however many channels the socket has; a
16-core part with few CCDs cannot read all of them. It binds only above the cores' own Little's-law
limit (``cores_per_ccd x core GB/s > ccd_read_gbs``); :func:`read_ceiling_gbs` takes the minimum.
"""
from __future__ import annotations

from dataclasses import dataclass

PLACEMENTS = ("replicate", "interleave", "first_touch")


@dataclass(frozen=True)
class NumaRead:
    """What a CPU kernel's threads can read: the theoretical DRAM GB/s of the nodes that hold the
    weights (``dram_gbs``), an absolute ceiling from the socket links (``link_gbs``, ``inf`` when no
    link is crossed), and the load latency of the slowest thread (``latency_ns``)."""

    dram_gbs: float
    link_gbs: float
    latency_ns: float


def placement_of(numa_aware: bool, numa_placement: str | None) -> str:
    """The runtime's weight placement: its ``numa_placement`` when it names one, else ``replicate``
    for a NUMA-aware runtime and ``first_touch`` (the OS default) for any other."""
    if numa_placement:
        if numa_placement not in PLACEMENTS:
            raise ValueError(f"numa_placement must be one of {', '.join(PLACEMENTS)}, got {numa_placement!r}")
        return numa_placement
    return "replicate" if numa_aware else "first_touch"


def numa_read(host, placement: str) -> NumaRead:
    """The nodes' DRAM, the socket links' ceiling and the slowest thread's latency for weights
    placed by ``placement`` on ``host`` (threads on every socket). One socket, or no stated link
    (``cross_socket_gbs`` 0) and remote latency: the node's own numbers; ``first_touch`` without a
    stated link still reads one node (the weights' only copy)."""
    s, local = host.sockets, host.mem_latency_ns
    remote = host.remote_latency_ns if host.remote_latency_ns > 0 else local
    if s <= 1 or placement == "replicate":
        return NumaRead(s * host.mem_bw_gbs, float("inf"), local)
    link = host.cross_socket_gbs
    if placement == "interleave":
        cap = s * s * link if link > 0 else float("inf")
        return NumaRead(s * host.mem_bw_gbs, cap, (local + (s - 1) * remote) / s)
    return NumaRead(host.mem_bw_gbs, s * link if link > 0 else float("inf"), remote)


def ccd_read_gbs(host, threads: int) -> float:
    """The GB/s the CCD links of a chiplet CPU let ``threads`` threads read: one link per CCD in
    use, ``ccd_read_gbs`` each; the OS spreads threads over the CCDs (one last-level-cache domain
    each), so ``min(ccds, threads)`` are in use. ``inf`` for a monolithic die (``ccds`` 0)."""
    if host.ccds <= 0 or host.ccd_read_gbs <= 0:
        return float("inf")
    return min(host.ccds, max(1, threads)) * host.ccd_read_gbs


def read_ceiling_gbs(read: NumaRead, host, threads: int) -> float:
    """The absolute GB/s ceiling the fabric puts on CPU reads (socket links and CCD links), before
    any kernel efficiency; ``inf`` when neither binds."""
    return min(read.link_gbs, ccd_read_gbs(host, threads))
