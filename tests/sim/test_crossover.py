"""``python -m sim crossover``: the table, the crossover (refined by bisection), and bad input."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim.prefill.crossover import CrossoverRow, bisect, crossover

ROOT = Path(__file__).resolve().parents[2]


def row(u, copy, cpu):
    return CrossoverRow(u, 0.0, copy, cpu, 0.0, 0.0)


def test_the_crossover_is_where_copying_wins_from_then_on():
    rows = [row(8, 2, 1), row(16, 1, 2), row(32, 3, 2), row(64, 2, 3), row(128, 2, 9)]
    assert crossover(rows) == 64                       # 16 wins once, but 32 loses again
    assert crossover(rows[:1]) is None
    assert crossover(rows, lambda lo, hi: (lo, hi)) == (32, 64)
    assert bisect(lambda n: n >= 45, 32, 64) == 45


def test_bisection_refines_to_the_exact_token_on_the_real_costs():
    from sim.machine import specs as config
    from sim.machine.cost_model import CostModel
    from sim.prefill.costs import PrefillCosts
    from sim.prefill.crossover import price
    from sim.prefill.routing import prompt_routing

    m = config.model("qwen3_30b_a3b", "q4_k_m", None)
    hw = config.hardware("rtx4090_pcie4", default_runtime="llama_cpp")
    pc = PrefillCosts.build(CostModel(hw, m, config.draft("none")), 128)
    experts = prompt_routing(m.name, "gsm8k", 256, 0, None)
    res = np.zeros((m.n_layers, m.n_experts), dtype=bool)
    rows = [price(pc, experts, res, u, 4096, 2) for u in (16, 128)]
    assert [r.winner for r in rows] == ["cpu", "copy"]
    n = crossover(rows, lambda lo, hi: bisect(lambda k: price(pc, experts, res, k, 4096, 2).winner == "copy", lo, hi))
    assert price(pc, experts, res, n, 4096, 2).winner == "copy"
    assert price(pc, experts, res, n - 1, 4096, 2).winner == "cpu"
    assert rows[0].touched < rows[1].touched <= m.n_experts


def cli(*args):
    return subprocess.run([sys.executable, "-m", "sim", "crossover", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_the_command_prints_the_table_and_writes_the_figure(tmp_path):
    p = cli("quant=q4_k_m", "ubatches=[8,512]", "samples=1", f"out={tmp_path}")
    assert p.returncode == 0, p.stderr
    assert "crossover: copy the touched experts from" in p.stdout and "llama.cpp copies from 32" in p.stdout
    assert (tmp_path / "crossover.png").stat().st_size > 0
    assert (tmp_path / "crossover.csv").read_text().count("\n") == 3


@pytest.mark.parametrize("arg, message", [
    ("ubatches=[0,64]", "ubatches=0,64: must be a list of integers in 1..65536"),
    ("ubatches=[]", "ubatches=: must be a list of integers in 1..65536"),
    ("samples=0", "samples=0: must be an integer in 1..64"),
    ("context=0", "context=0: must be an integer >= 1"),
    ("gpu=rtx9999", "gpu=rtx9999: allowed values are"),
    ("bogus=1", "unknown key 'bogus'"),
])
def test_bad_input_is_one_line_and_exit_2(arg, message, tmp_path):
    p = cli(arg, f"out={tmp_path}")
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], p.stderr
