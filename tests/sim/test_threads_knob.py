"""``threads=N`` (llama.cpp ``-t N``): checked at the boundary, mapped onto the machine's CPU threads;
CPU compute scales with min(N, cores), host bandwidth with N until the channels saturate."""
import subprocess
import sys

import pytest

from sim.machine import specs as config
from sim.machine.cost_model import CostModel
from sim.run.user_input import UserInputError, threads_override

MACHINE = {"gpu": "rtx4090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16"}


def _hw(threads=None):
    return config.hardware(MACHINE | threads_override({"threads": threads}), default_runtime="llama_cpp")


@pytest.mark.parametrize("bad", [0, 4097, 2.5, "8", True, -1])
def test_bad_threads_are_refused_naming_key_value_and_range(bad):
    with pytest.raises(UserInputError, match=r"^threads=.*: must be an integer in 1\.\.4096 or null$"):
        threads_override({"threads": bad})


def test_absent_or_null_threads_leave_the_machine_as_it_was():
    assert threads_override({}) == {} and threads_override({"threads": None}) == {}
    assert _hw(None) == config.hardware(MACHINE, default_runtime="llama_cpp")
    assert threads_override({"threads": 8.0}) == {"cpu_threads": 8}


def test_compute_scales_with_threads_up_to_the_cores_and_bandwidth_saturates():
    full = _hw()
    cores = full.cpu_threads
    one, two, many = _hw(1), _hw(2), _hw(4096)
    assert many == full                                        # more threads than cores: every core, no more
    assert one.cpu_tflops == pytest.approx(full.cpu_tflops / cores)
    assert two.cpu_tflops == pytest.approx(2 * one.cpu_tflops)
    # one llama.cpp thread draws lines x 64 B / latency (conf/runtime/llama_cpp.yaml, conf/host): far below the socket
    per_core = 13.53 * 64 / 78
    assert one.cpu_mem_bw_gbs * one.cpu_mem_eff == pytest.approx(per_core, rel=1e-3)
    assert two.cpu_mem_bw_gbs == pytest.approx(2 * one.cpu_mem_bw_gbs)
    bw = [_hw(n).cpu_mem_bw_gbs for n in range(1, cores + 1)]
    assert all(a <= b for a, b in zip(bw, bw[1:])) and bw[-1] == full.cpu_mem_bw_gbs
    assert bw.index(bw[-1]) + 1 < cores                       # saturated before every core is in use


def test_fewer_threads_make_cpu_experts_slower():
    m, d = config.model("qwen3_30b_a3b"), config.draft("none")
    times = [CostModel(_hw(n), m, d).cpu_expert_table()[1] for n in (1, 2, 4, None)]
    assert times[0] > times[1] > times[2] >= times[3]


def test_plan_refuses_threads_zero_with_one_line(tmp_path):
    p = subprocess.run([sys.executable, "-m", "sim", "plan", "threads=0", f"out={tmp_path}"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.strip() == "error: threads=0: must be an integer in 1..4096 or null"
