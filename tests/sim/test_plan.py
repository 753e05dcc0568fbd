"""The placement planner: its fast evaluator against the SimPy engine, the ranking, the command lines, the CLI."""
from __future__ import annotations

import csv
import itertools
import subprocess
import sys

import numpy as np
import pytest

from sim.commands.plan import best_per_family, cli_args
from sim.plan.enumerate import best_layers, enumerate_all
from sim.plan.evaluate import Setting, StaticTable, vram_used
from sim.plan.report import command, ot_pattern
from sim.run.runner import run_one
from sim.run.spec import RunSpec

HW = {"gpu": "rtx2080", "host": "hedt_ddr4_4ch", "link": "pcie3_x16"}
TOKENS = 16


def setting(**kw) -> Setting:
    base = dict(model="qwen3_30b_a3b", hardware=HW, quant="q4_k_m", gen_tokens=TOKENS)
    return Setting(**{**base, **kw})


@pytest.mark.parametrize("policy,args,slots,draft", [
    ("llamacpp", {"n_cpu_moe": 36}, 12 * 128, "none"),
    ("llamacpp", {"n_cpu_moe": 0}, 48 * 128, "none"),
    ("ktransformers", {}, 20 * 48, "none"),
    ("llamacpp_sd", {"n_cpu_moe": 45}, 3 * 128, "qwen3_0_6b"),
])
def test_static_table_equals_the_simpy_engine(policy, args, slots, draft):
    table = StaticTable(setting(draft=draft), policy, all_gpu=slots == 48 * 128)
    ours = table.tps(table.decode_s(table.policy_mask(slots, **args)))
    hw = {**HW, "vram_gib": 24.0}     # the engine's memory check only; costs do not depend on VRAM
    row = run_one(RunSpec.of(policy=policy, hardware=hw, quant="q4_k_m", gen_tokens=TOKENS, draft=draft, policy_args=args,
                  cache_ratio=slots / (48 * 128))).row
    assert ours == pytest.approx(row["tps"], rel=1e-9)


def test_all_experts_on_the_gpu_is_priced_as_one_graph_forward():
    """--n-cpu-moe 0 (no CPU split) is the enumerated placement that gets the runtime's CUDA-graph kernels."""
    cands = enumerate_all(setting(vram_budget_gib=None), ["llama_cpp"], [], [])
    n0 = next(c for c in cands if c.knob == "n_cpu_moe" and c.value == 0)
    hw = {**HW, "vram_gib": 24.0}
    row = run_one(RunSpec.of(policy="llamacpp", hardware=hw, quant="q4_k_m", gen_tokens=TOKENS, policy_args={"n_cpu_moe": 0})).row
    assert n0.tps == pytest.approx(row["tps"], rel=1e-9)


@pytest.mark.parametrize("policy,n,draft", [("llamacpp", 20, "none"), ("llamacpp", 48, "none"),
                                            ("llamacpp", 49, "none"), ("llamacpp_sd", 44, "qwen3_0_6b")])
def test_ngl_equals_the_simpy_engine_and_its_memory_plan(policy, n, draft):
    """``-ngl N``: CPU attention and CPU output head priced in closed form, as the engine runs them."""
    s = setting(draft=draft)
    table = StaticTable(s, policy, all_gpu=n > 48)     # -ngl 49: everything on the GPU, one graph forward
    hw = {**HW, "vram_gib": 24.0}
    res = run_one(RunSpec.of(policy=policy, hardware=hw, quant="q4_k_m", gen_tokens=TOKENS, draft=draft,
                  policy_args={"gpu_layers": n}))
    assert table.tps(table.ngl_s(n)) == pytest.approx(res.row["tps"], rel=1e-9)
    ours = Setting(**{**s.__dict__, "_cache": {}, "vram_budget_gib": None})
    ours.hardware = hw
    plan = ours.memory(policy, min(n, 48) * 128, cpu_layers=48 - min(n, 48))
    assert vram_used(plan) == pytest.approx(vram_used(res.plan), rel=1e-12)
    if n < 48:   # fewer GPU layers: less KV and fewer weights in VRAM than all 48
        assert vram_used(plan) < vram_used(ours.memory(policy, 48 * 128))


def test_whole_layer_sums_and_the_best_layer_set_match_brute_force():
    table = StaticTable(setting(model="olmoe_1b_7b", quant="q4_k_m", draft="qwen3_0_6b"), "llamacpp_sd")
    on_gpu, on_cpu = table.whole_layer_s()
    L, E = table.gpu.shape[1:]
    best = None
    for layers in itertools.combinations(range(L), 2):
        mask = np.zeros((L, E), bool)
        mask[list(layers)] = True
        chosen = np.isin(np.arange(L), layers)
        additive = table.fixed_s + on_gpu[chosen].sum() + on_cpu[~chosen].sum()
        assert additive == pytest.approx(table.decode_s(mask), rel=1e-12)
        best = additive if best is None else min(best, additive)
    chosen = np.isin(np.arange(L), best_layers(on_gpu, on_cpu, 2))
    assert table.fixed_s + on_gpu[chosen].sum() + on_cpu[~chosen].sum() == pytest.approx(best, rel=1e-12)


def test_the_best_placement_is_the_fastest_evaluated_and_fits():
    cands = enumerate_all(setting(), ["llama_cpp", "ktransformers", "dynamic"], ["ondemand_lru"], [])
    best = best_per_family(cands)[0]
    assert best.fits and vram_used(best.plan) <= best.plan.vram
    assert all(best.tps >= c.tps for c in cands if c.fits)
    assert any(not c.fits and c.tps > best.tps for c in cands)   # faster placements exist, but do not fit
    fitting_n = [c.value for c in cands if c.knob == "n_cpu_moe" and c.fits]
    assert fitting_n == list(range(min(fitting_n), 49))          # fits is monotone in N


def test_more_vram_never_makes_the_best_prediction_slower():
    best = []
    for budget in (3.0, 4.5, 6.0, 7.0, 8.0):
        cands = enumerate_all(setting(vram_budget_gib=budget), ["llama_cpp", "ktransformers", "dynamic"],
                              ["ondemand_lru"], [])
        best.append(best_per_family(cands)[0].tps)
    assert all(a <= b for a, b in zip(best, best[1:])), best
    assert best[-1] > best[0]


def test_command_lines():
    from sim.plan.enumerate import Candidate

    plan = setting().memory("llamacpp", 0)
    n = Candidate("llama_cpp", "llamacpp", "n_cpu_moe", 36, 1.0, plan)
    assert command(n, 48, 0, 4096, "q4_k_m", "") == "llama-server -m MODEL.gguf -ngl 99 --n-cpu-moe 36 -c 4096"
    # DeepSeek-V2-Lite: block 0 is dense, so 5 MoE layers on the CPU are blocks 0..5
    assert "--n-cpu-moe 6 " in command(Candidate("llama_cpp", "llamacpp", "n_cpu_moe", 5, 1.0, plan), 26, 1, 4096, "q4_k_m", "")
    assert ot_pattern([0, 1, 2]) == '-ot "blk\\.([0-2])\\.ffn_.*_exps\\.=CPU"'
    ot = Candidate("llama_cpp_sd", "llamacpp_sd", "ot", 2, 1.0, plan, gpu_layers=(1, 3), gamma=8)
    assert command(ot, 4, 0, 2048, "q4_k_m", "") == (
        'llama-server -m MODEL.gguf -ngl 99 -ot "blk\\.(0|2)\\.ffn_.*_exps\\.=CPU" '
        '-md DRAFT.gguf -ngld 99 --draft-max 8 -c 2048')
    ngl = Candidate("llama_cpp", "llamacpp", "ngl", 30, 1.0, plan)
    assert command(ngl, 48, 0, 4096, "q4_k_m", "") == "llama-server -m MODEL.gguf -ngl 30 -c 4096"
    kt = Candidate("ktransformers", "ktransformers", "kt_num_gpu_experts", 12, 1.0, plan)
    assert "--kt-num-gpu-experts 12 " in command(kt, 48, 0, 4096, "int4", "") and "AMXINT4" in command(kt, 48, 0, 4096, "int4", "")
    assert cli_args(["engines=llama_cpp,dynamic", "context=4096"]) == ["engines=[llama_cpp,dynamic]", "context=4096"]


def _plan(*args, cwd):
    return subprocess.run([sys.executable, "-m", "sim", "plan", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_cli_llmfit_point(tmp_path):
    """Qwen3-30B-A3B Q4_K_M, RTX 2080 8 GB, quad-channel DDR4, context 4096 (llmfit PR #755: 36.7 tok/s at N=36)."""
    p = _plan("quant=q4_k_m", "gpu=rtx2080", "host=hedt_ddr4_4ch", "link=pcie3_x16", "context=4096",
              f"gen_tokens={TOKENS}", "engines=llama_cpp,ktransformers", "measured=36:36.7", f"out={tmp_path}",
              cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "llama.cpp --n-cpu-moe 36: predicted" in p.stdout and "measured 36.7 tok/s" in p.stdout
    assert "llama-server -m MODEL.gguf -ngl 99 --n-cpu-moe 30 -c 4096" in p.stdout
    assert "how sure " in p.stdout and (tmp_path / "plan.png").stat().st_size > 0
    best = max((r for r in csv.DictReader(open(tmp_path / "placements.csv")) if r["fits"] == "True"
                and r["engine"] != "dynamic"), key=lambda r: float(r["tps"]))
    assert p.stdout.count("\nbest: ") == 1 and f"\nbest: {best['engine']} " in p.stdout      # the fastest engine placement
    assert "llama-bench -m MODEL.gguf" in p.stdout
    assert "generate_device" in (tmp_path / "ktransformers_rules.yaml").read_text()
    assert "(80%: " in p.stdout and "extrapolating: no training point on host hedt_ddr4_4ch" in p.stdout   # the 2080 has (L-755, L-778)
    rows = list(csv.DictReader(open(tmp_path / "placements.csv")))
    n33 = next(r for r in rows if r["knob"] == "n_cpu_moe" and r["value"] == "30")   # the CUDA context per SM (46 on a 2080)
    assert n33["fits"] == "True" and float(n33["vram_used_gib"]) <= 8.0 and n33["context"] == "4096"
    assert next(r for r in rows if r["knob"] == "n_cpu_moe" and r["value"] == "29")["fits"] == "False"
    ngl = {int(r["value"]): r for r in rows if r["knob"] == "ngl"}
    assert sorted(ngl) == list(range(49))
    # at equal VRAM, whole-layer offload is slower than keeping attention on the GPU (CPU attention, CPU head)
    best_ngl = max((r for r in ngl.values() if r["fits"] == "True"), key=lambda r: float(r["tps"]))
    assert float(best_ngl["tps"]) < float(n33["tps"])


@pytest.mark.parametrize("arg,words", [("context=-5", ["context=-5", ">= 1"]),
                                       ("engines=llama_cpp,vllm", ["engines=llama_cpp,vllm", "llama_cpp, ktransformers, dynamic"]),
                                       ("measured=60:30", ["measured=60:30", "0..48"]),
                                       ("gpu=rtx9999", ["gpu=rtx9999", "rtx2080"])])
def test_cli_bad_input_is_one_line_exit_2(tmp_path, arg, words):
    p = _plan(arg, f"out={tmp_path}", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert all(w in p.stderr for w in words), p.stderr


def test_plan_on_a_trace_file_prices_its_routing(tmp_path):
    """trace=: the user's own routing (here a saved synthetic trace) is what every placement is priced on."""
    from traces.io import load_trace, save_trace
    from traces.synth import synthesize

    path = save_trace(synthesize("qwen3_30b_a3b", "humaneval", TOKENS + 1, 3), tmp_path / "mine.npz")
    table = StaticTable(setting(trace=load_trace(path)), "llamacpp")
    ours = table.tps(table.decode_s(table.policy_mask(12 * 128, n_cpu_moe=36)))
    row = run_one(RunSpec.of(policy="llamacpp", hardware=HW, quant="q4_k_m", gen_tokens=TOKENS, trace=str(path),
                  policy_args={"n_cpu_moe": 36})).row
    assert ours == pytest.approx(row["tps"], rel=1e-9)


def test_how_sure_reads_the_runtimes_row_of_the_validate_table(tmp_path):
    from sim.plan.report import runtime_error_row

    doc = tmp_path / "fidelity.md"
    doc.write_text("llama_cpp 12 points 99.9% in prose\n\nby runtime:           n   median |err|  within ±30%\n"
                   "custom_cuda                    1     1.8%    100%\nllama_cpp                     12    15.5%     92%\n\n"
                   "by source:\nllama_cpp  3  50.0%  0%\n")
    assert runtime_error_row(doc, "llama_cpp") == ("12", "15.5")     # the table's row, not the prose or a later table
    assert runtime_error_row(doc, "llama") is None and runtime_error_row(doc, "vllm") is None
    assert runtime_error_row(tmp_path / "none.md", "llama_cpp") is None
    # a newer section's table first; an older one of a smaller training set is skipped for its count
    doc.write_text("by runtime:\nllama_cpp                     24    15.4%     75%\n\nby runtime:\n"
                   "llama_cpp                     12    15.5%     92%\n")
    assert runtime_error_row(doc, "llama_cpp", 12) == ("12", "15.5")
    assert runtime_error_row(doc, "llama_cpp", 24) == ("24", "15.4")
    assert runtime_error_row(doc, "llama_cpp", 99) is None


def test_how_sure_quotes_the_table_of_the_current_training_set():
    from sim.plan.confidence import how_sure, support

    for runtime in ("ktransformers", "llama_cpp"):
        n = support()[runtime][0]
        assert f"{n} published points" in how_sure(runtime) and "median error" in how_sure(runtime)
