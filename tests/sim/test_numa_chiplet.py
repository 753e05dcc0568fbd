"""Multi-socket NUMA placement and per-CCD read links (sim/machine/numa.py), on tiny hosts with
hand-computed rates: one node's DRAM and the socket link for first-touch pages, every node and 4x
the link for interleaved pages, the slowest (remote) thread's latency in Little's law, and a
chiplet CPU's CCD links capping what its cores can read."""
from dataclasses import replace

import pytest

from sim.machine.compose import HostSpec, compose, load_yaml, runtime_spec
from sim.machine.numa import ccd_read_gbs, numa_read, placement_of

TWO_SOCKET = dict(name="t2s", cpu="toy 2-socket", kind="desktop", cores=24, sockets=2, mem_channels=4,
                  mem_mts=3125, mem_bw_gbs=100.0, cross_socket_gbs=30.0, isa="avx512", fp32_tflops=2.0,
                  mem_latency_ns=100.0, remote_latency_ns=160.0)


def _cpu_gbs(host: dict, threads: int | None = None, **runtime) -> float:
    """The CPU expert rate the cost model reads (``cpu_mem_bw_gbs x cpu_mem_eff``), GB/s."""
    rt = runtime_spec({"cpu_core_lines": 5.0, "cpu_mem_eff": 0.5, **runtime})
    flat = compose({"gpu": "rtx4090", "host": host, "link": "pcie4_x16", "cpu_threads": threads}, rt)
    return flat["cpu_mem_bw_gbs"] * flat["cpu_mem_eff"]


def test_placements_read_nodes_links_and_latencies():
    h = HostSpec(**TWO_SOCKET)
    ft, il, rep = numa_read(h, "first_touch"), numa_read(h, "interleave"), numa_read(h, "replicate")
    assert (ft.dram_gbs, ft.link_gbs, ft.latency_ns) == (100.0, 60.0, 160.0)     # one node; 2 x 30 over the link
    assert (il.dram_gbs, il.link_gbs, il.latency_ns) == (200.0, 120.0, 130.0)    # both nodes; 4 x 30; mean latency
    assert (rep.dram_gbs, rep.latency_ns) == (200.0, 100.0) and rep.link_gbs == float("inf")
    one = HostSpec(**{**TWO_SOCKET, "sockets": 1, "cross_socket_gbs": 0.0})
    assert numa_read(one, "first_touch") == numa_read(one, "replicate")


def test_first_touch_threads_run_at_the_remote_latency_and_the_link_caps_them():
    # 24 threads x 5 lines x 64 B / 160 ns = 48 GB/s < node 100 x 0.5 = 50 < link 2 x 30 = 60
    assert _cpu_gbs(TWO_SOCKET) == pytest.approx(48.0)
    # link 2 x 20 = 40 GB/s binds below both
    assert _cpu_gbs({**TWO_SOCKET, "cross_socket_gbs": 20.0}) == pytest.approx(40.0)
    # replicated per node: 2 x 100 x 0.5 = 100 vs 24 x 5 x 64 / 100 = 76.8 (local latency)
    assert _cpu_gbs(TWO_SOCKET, numa_aware=True) == pytest.approx(76.8)
    # interleaved: 24 x 5 x 64 / 130 = 59.08 (mean latency) < 100 < link 4 x 30 = 120
    assert _cpu_gbs(TWO_SOCKET, numa_placement="interleave") == pytest.approx(24 * 320 / 130)


def test_ccd_links_cap_a_chiplet_cpu():
    epyc = dict(TWO_SOCKET, sockets=1, cross_socket_gbs=0.0, cores=16, ccds=2, ccd_read_gbs=30.0)
    h = HostSpec(**epyc)
    assert ccd_read_gbs(h, 16) == 60.0 and ccd_read_gbs(h, 1) == 30.0
    assert ccd_read_gbs(replace(h, ccds=0), 16) == float("inf")
    # 16 x 20 x 64 / 100 = 204.8 per-core; 100 x 0.8 = 80 DRAM; 2 CCDs x 30 = 60 binds
    assert _cpu_gbs(epyc, cpu_core_lines=20.0, cpu_mem_eff=0.8) == pytest.approx(60.0)
    # one thread: its own Little's-law rate 12.8 GB/s, below one CCD's 30
    assert _cpu_gbs(epyc, threads=1, cpu_core_lines=20.0, cpu_mem_eff=0.8) == pytest.approx(12.8)


def test_on_the_training_hosts_the_ccd_links_do_not_bind():
    """The sourced CCD facts: 4 x 64 GB/s on the 16-core EPYC, 2 x 64 on the 9900X, above their DRAM."""
    for name in ("epyc_16c_ddr5", "ryzen9900x_ddr5_2ch"):
        h = load_yaml("host", name)
        assert h["ccds"] * h["ccd_read_gbs"] > h["mem_bw_gbs"]


def test_placement_names_are_checked():
    assert placement_of(True, "") == "replicate" and placement_of(False, None) == "first_touch"
    assert placement_of(True, "interleave") == "interleave"
    with pytest.raises(ValueError, match="numa_placement must be one of"):
        placement_of(False, "spread")
