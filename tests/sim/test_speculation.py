"""Gamma search, break-even crossing, fair-comparison rules, AdaSpec's draft-length controller."""
import numpy as np
import pytest

from sim.machine import specs as config
from sim.policies import make_policy
from sim.speculation.breakeven import Search, breakeven, crossing
from sim.speculation.fair import equal_vram_slots, run_acceptance
from sim.speculation.gamma import best_gamma


@pytest.mark.parametrize("peak", [1, 5, 7, 12])
def test_best_gamma_finds_the_peak_of_a_unimodal_curve(peak):
    calls = []
    g, tps, seen = best_gamma(lambda g: calls.append(g) or -abs(g - peak), 1, 12)
    assert (g, tps) == (peak, 0) and len(calls) <= 10 and len(set(calls)) == len(calls)


def test_crossing_interpolates_and_flags_the_ends():
    assert crossing([0.5, 0.7, 0.9], [0.8, 0.9, 1.1]) == (pytest.approx(0.8), False)
    assert crossing([0.5, 0.7], [1.2, 1.3]) == (0.5, True)
    assert crossing([0.5, 0.7], [0.2, 0.3]) == (None, False)


def test_equal_vram_gives_the_draft_bytes_to_slots():
    hw, m, d = config.hardware("rtx4090_pcie4"), config.model("qwen3_30b_a3b"), config.draft("qwen3_4b_q8_0")
    extra = int((4.022e9 * 1.0625 + 4096 * 147456) // (4718592 * 2))
    assert equal_vram_slots(hw, m, d, 0.17, 4096) == round(0.17 * 6144) + extra == 1044 + 516


def test_acceptance_comes_from_the_command_then_the_draft_then_the_workload():
    assert run_acceptance("gsm8k", config.draft("ngram"), None) == 0.30
    assert run_acceptance("gsm8k", config.draft("qwen3_4b_q8_0"), None) == 0.82
    assert run_acceptance("gsm8k", config.draft("ngram"), 0.5) == 0.5


def _ctx():
    from sim.policies.base import CostTable, PolicyContext
    costs = CostTable(gpu_expert_s=np.zeros(3), cpu_expert_s=np.zeros(3), transfer_s=0.0, layer_fixed_s=0.0,
                      draft_phase_s=1.2e-3, expert_bytes=1, step_fixed_s=1e-3)
    return PolicyContext(n_layers=1, n_experts=4, top_k=1, n_slots=1, gamma=12, costs=costs)


def test_adaspec_climbs_while_faster_and_stops_when_slower():
    """Draft 0.1 ms per token, 1 ms fixed per step (no layers): with every draft accepted, tokens per
    second grows with gamma ((g + 1) / (1 + 0.1 g) ms), so it climbs through every arm; with none
    accepted gamma 1 is slower (1 / 1.1 ms) and it returns to 0."""
    def run(accept_all: bool, steps: int = 14):
        pol = make_policy("adaspec", warmup=2, probe=1, explore_every=100)
        pol.reset(_ctx(), None)
        for s in range(steps):
            g = pol.choose_gamma(s)
            pol.on_step_start(s, None, None)
            pol.on_step_end(s, g + 1, g if accept_all else 0)
        return pol.gammas
    assert run(True)[:10] == [0, 0, 1, 2, 3, 4, 6, 8, 12, 12]
    assert run(False)[:5] == [0, 0, 1, 0, 0]


@pytest.mark.slow
def test_breakeven_on_a_tiny_grid():
    args = dict(workload="gsm8k", cache_ratio=0.12, gen_tokens=6, seed=0, prompt_tokens=256, context=4096,
                hardware="rtx4090_pcie4", model="mixtral_8x7b", draft="qwen3_0_6b", experiment="t")
    b = breakeven(args, ["llamacpp", "fiddler"], ["llamacpp_sd"], [0.3, 1.0], Search(1, 3, ratios=[0.0, 0.5]),
                  progress=False)
    assert b.ar_tps == max(b.ar_tps_by_policy.values()) and len(b.curve) == 2
    assert b.curve[1]["tps"] > b.curve[0]["tps"]             # more acceptance, more speed
    sp = np.asarray(b.map["speedup"])
    assert sp.shape == (2, 2) and (sp[0] >= sp[1]).all()       # a costlier draft never helps


@pytest.mark.parametrize("arg, message", [
    ("gamma_max=20", "error: gamma_max=20: must be an integer in 1..12"),
    ("acceptances=[0.5,1.5]", "error: acceptances=1.5: must be a number in 0..1"),
    ("sd_policies=[nope]", "error: sd_policies: unknown policy 'nope'; valid: "),
    ("equal_vram=3", "error: equal_vram=3: must be true or false")])
def test_breakeven_bad_input_is_one_line_and_exit_2(arg, message, tmp_path):
    """The breakeven command checks its keys through sim.run.user_input's RULES, before any run."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "sim", "breakeven", arg, f"out={tmp_path}"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.startswith(message) and len(p.stderr.strip().splitlines()) == 1
    assert "Traceback" not in p.stderr and not (tmp_path / "breakeven.json").exists()


def test_a_drafter_field_out_of_range_is_refused_before_running(tmp_path):
    """``draft.acceptance_decay`` has a rule: (0, 1]."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "sim", "run", "draft=ngram", "draft.acceptance_decay=1.5",
                        f"out={tmp_path}"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stderr.strip() == "error: draft.acceptance_decay=1.5: must be a number in (0..1]"


def test_breakeven_takes_a_workload_preset_from_the_command_line(tmp_path):
    """``python -m sim breakeven workload=NAME`` (the README's form) selects the workload preset."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "sim", "breakeven", "workload=alpaca", "gen_tokens=4", "acceptances=[0.5,0.9]",
                        "ar_policies=[llamacpp]", "sd_policies=[llamacpp_sd]", "gamma_max=2", f"out={tmp_path}"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "  name: alpaca" in (tmp_path / "config.yaml").read_text()


def test_breakeven_refuses_a_single_acceptance(tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "sim", "breakeven", "acceptances=[0.9]", f"out={tmp_path}"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip() == ("error: acceptances=[0.9]: must list at least 2 different "
                                                     "values (a curve to cross)")
