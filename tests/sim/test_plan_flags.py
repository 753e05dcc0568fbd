"""sim plan's engine flags: layer-set regexes checked with ``re`` against GGUF tensor names and
kTransformers module names, the explained llama.cpp flags on a hand case, the llama-bench call, the
kTransformers rule file, the calibration support per runtime, and the engine-first headline."""
import re

import pytest
import yaml

from sim.plan.confidence import how_sure, support
from sim.plan.enumerate import Candidate
from sim.plan.flags import EngineArgs, bench_line, cpu_blocks, explain, ot_arg, server_line
from sim.plan.kt_rules import rules_text
from sim.plan.regex import any_of, int_range

PROJ = ("ffn_up_exps", "ffn_gate_exps", "ffn_down_exps", "ffn_gate_up_exps")
OTHER = ("ffn_gate_inp", "ffn_up_shexp", "ffn_down_shexp", "attn_q", "attn_k", "ffn_norm", "exp_probs_b")


def gguf_names(n_blocks):
    """GGUF tensor names of ``n_blocks`` blocks (gguf-py constants: blk.N.<name>.weight), plus the others."""
    names = [f"blk.{b}.{t}.weight" for b in range(n_blocks) for t in PROJ + OTHER]
    return names + ["token_embd.weight", "output_norm.weight", "output.weight"]


def selected_blocks(pattern, names):
    """The blocks whose tensors ``pattern`` selects (llama.cpp searches, std::regex_search); every
    selected tensor must be a routed-expert projection."""
    hits = [n for n in names if re.search(pattern, n)]
    assert all(any(f".{p}." in n for p in PROJ) for n in hits), hits
    return {int(n.split(".")[1]) for n in hits}


def test_int_range_matches_exactly_its_integers_brute_force():
    for lo in range(0, 106):                   # crosses the one-, two- and three-digit boundaries
        for hi in range(lo, 106):
            r = re.compile("|".join(int_range(lo, hi)))
            assert [n for n in range(115) if r.fullmatch(str(n))] == list(range(lo, hi + 1)), (lo, hi)
    assert int_range(33, 47) == ["3[3-9]", "4[0-7]"] and int_range(0, 32) == ["[0-9]", "[12][0-9]", "3[0-2]"]
    assert any_of([0, 2, 3, 4, 9]) == "(0|[2-4]|9)"


@pytest.mark.parametrize("blocks", [range(0, 33), range(33, 48), [0, 2, 5, 11, 12, 47], [7], range(0, 94), [1, 10, 100]])
def test_ot_regex_selects_exactly_the_expert_tensors_of_its_blocks(blocks):
    names = gguf_names(128)
    pattern, _, buft = ot_arg(blocks).rpartition("=")
    assert buft == "CPU" and selected_blocks(pattern, names) == set(blocks)


A = EngineArgs(n_layers=4, n_dense=1, context=2048, threads=6, cpu="Ryzen X")


def _cand(knob, value, gpu_layers=(), engine="llama_cpp", tps=10.0, gamma=0):
    from types import SimpleNamespace

    plan = SimpleNamespace(free_for_experts=1.0, n_slots=0, max_slots=10**6)
    return Candidate(engine, "llamacpp", knob, value, tps, plan, gpu_layers=gpu_layers, gamma=gamma)


def test_n_cpu_moe_flags_and_their_ot_twin_on_a_hand_case():
    """4 MoE layers after 1 dense block: --n-cpu-moe 2 (MoE layers 0, 1) is --n-cpu-moe 3 (blocks 0..2)."""
    c = _cand("n_cpu_moe", 2)
    assert cpu_blocks(c, A) == [1, 2]
    assert server_line(c, A) == ("llama-server -m MODEL.gguf -ngl 99 --n-cpu-moe 3 -c 2048 -ub 512 -t 6 "
                                 "-ctk f16 -ctv f16 -fa on")
    assert server_line(c, A, use_ot=True) == ('llama-server -m MODEL.gguf -ngl 99 -ot "blk\\.([12])\\.ffn_.*_exps\\.=CPU" '
                                              "-c 2048 -ub 512 -t 6 -ctk f16 -ctv f16 -fa on")
    lines = explain(c, A)
    assert [l.split()[0] for l in lines] == ["-ngl", "--n-cpu-moe", "-ot", "-c", "-ub", "-t", "-ctk", "-ctv", "-fa"]
    assert all(": " in l and len(l.split(": ", 1)[1]) > 10 for l in lines)
    # --n-cpu-moe 3 keeps blocks 0..2 on the CPU; block 0 is dense (no expert tensors): the same tensors
    names = gguf_names(5)
    names = [n for n in names if not (n.startswith("blk.0.") and "_exps" in n)]
    ncmoe = "|".join(f"blk\\.{i}\\.ffn_(up|down|gate|gate_up)_(ch|)exps" for i in range(3))   # common/arg.cpp
    assert selected_blocks(ncmoe, names) == selected_blocks(ot_arg([1, 2]).rpartition("=")[0], names) == {1, 2}


def test_ot_placement_and_speculative_flags():
    c = _cand("ot", 2, gpu_layers=(0, 2), engine="llama_cpp_sd", gamma=6)
    assert cpu_blocks(c, A) == [2, 4]
    line = server_line(c, A)
    assert '-ot "blk\\.(2|4)\\.ffn_.*_exps\\.=CPU"' in line and "--n-cpu-moe" not in line
    assert line.endswith("-md DRAFT.gguf -ngld 99 --draft-max 6")
    assert "cannot express" in " ".join(explain(c, A))


def test_one_llama_bench_call_measures_the_top_three():
    cands = [_cand("n_cpu_moe", n) for n in (2, 3, 4)]
    assert bench_line(cands, A, 256, 128) == ("llama-bench -m MODEL.gguf -ngl 99 -ncmoe 3,4,5 -t 6 -fa 1 -ctk f16 "
                                              "-ctv f16 -ub 512 -p 0 -n 128 -d 256 -r 3")
    mixed = bench_line([_cand("ot", 2, gpu_layers=(0, 2)), _cand("n_cpu_moe", 1)], A, 0, 64)
    groups = re.search(r'-ot "([^"]*)"', mixed).group(1).split(",")   # llama-bench: ',' between tests
    assert [selected_blocks(g.rpartition("=")[0], gguf_names(5)) for g in groups] == [{2, 4}, {1}]
    assert " -d " not in mixed


def test_ktransformers_rules_place_exactly_the_chosen_layers():
    gpu, cpu = [b for b in range(1, 27) if b % 3 == 0], [b for b in range(1, 27) if b % 3]
    rules = yaml.safe_load(rules_text(gpu, cpu, "deepseek_v2_lite"))
    modules = [f"model.layers.{i}.mlp.experts" for i in range(27)] + ["model.layers.0.mlp", "model.layers.3.mlp"]
    placed = {}
    for i, rule in enumerate(rules):
        assert rule["replace"]["class"] == "ktransformers.operators.experts.KTransformersExperts"
        assert rule["recursive"] is False
        for name in modules:
            if re.match(rule["match"]["name"], name):
                assert name not in placed        # disjoint: the order of the rules does not matter
                placed[name] = rule["replace"]["kwargs"]["generate_device"]
    assert placed == {**{f"model.layers.{b}.mlp.experts": "cuda" for b in gpu},
                      **{f"model.layers.{b}.mlp.experts": "cpu" for b in cpu}}


def test_how_sure_counts_points_and_sources_per_runtime(tmp_path):
    path = tmp_path / "train.yaml"
    run = "{policy: llamacpp, gpu: rtx4090, host: desktop_ddr5_2ch, link: pcie4_x16}"
    path.write_text("points:\n" + "".join(
        f"  - {{id: P{i}, measured_tok_s: 10, source: {src}, grade: A, run: {run}}}\n"
        for i, src in enumerate(["paper-a", "paper-a", "paper-b"])) +
        "  - {id: K1, measured_tok_s: 5, source: paper-a, grade: A, run: {policy: ktransformers, gpu: rtx4090, "
        "host: desktop_ddr5_2ch, link: pcie4_x16}}\n")
    support.cache_clear()
    assert support(path) == {"llama_cpp": (3, ("paper-a", "paper-b")), "ktransformers": (1, ("paper-a",))}
    doc = tmp_path / "none.md"
    assert how_sure("llama_cpp", path, doc) == "calibrated on 3 published points from 2 sources (paper-a, paper-b)"
    assert how_sure("ktransformers", path, doc) == ("barely calibrated (1 published point from 1 source (paper-a): "
                                                    "under 3 points and a single source)")
    assert how_sure("vllm", path, doc).startswith("uncalibrated")
    support.cache_clear()


def test_headline_names_the_fastest_engine_placement_and_puts_simulator_policies_apart(tmp_path):
    from types import SimpleNamespace

    from sim.plan import headline

    plan = SimpleNamespace(free_for_experts=1.0, n_slots=0, max_slots=10**6, vram=8 * 2**30, non_expert=2**30,
                           expert_bytes=1, kv=2**28, workspace=2**29, reserved=0, draft=0)
    dyn = Candidate("dynamic", "moespac_ar", "slots", 100, 50.0, plan, extra={"hit_rate": 0.6, "cache_ratio": 0.3})
    kt = Candidate("ktransformers", "ktransformers", "kt_num_gpu_experts", 3, 25.0, plan)
    best = [_cand("n_cpu_moe", n, tps=30.0 - n) for n in (1, 2, 3, 4)]
    for c in best:
        c.plan = plan
    ranked = [dyn, best[0], kt]
    opts = {"top": 5, "prompt_tokens": 0, "gen_tokens": 64}
    lines = headline.engine_lines(ranked, [dyn, kt] + best, A, "q4_k_m", opts, tmp_path)
    head = next(l for l in lines if l.startswith("best: "))
    assert head.startswith("best: llama_cpp --n-cpu-moe 1") and "29.0 tok/s" in head
    assert not any("moespac_ar" in l for l in lines)
    assert any(l.strip().startswith("llama-bench") and "-ncmoe 2,3,4 " in l for l in lines)   # the top 3 (N+1 dense)
    sim = headline.simulator_lines(ranked, 4, "model=x", 5)
    assert sim[1].startswith("simulator policies, no engine flag") and "50.0 tok/s  moespac_ar" in sim[2]
    assert "python -m sim run policy=moespac_ar model=x" in sim[2]
    path = headline.write_kt_rules([dyn, kt] + best, A, tmp_path, "tiny")
    rules = yaml.safe_load(path.read_text())
    assert [r["replace"]["kwargs"]["generate_device"] for r in rules] == ["cuda", "cpu"]


def test_flags_are_the_memory_options_the_plan_charged():
    """A plan made with ``cache_type_k=q8_0 cache_type_v=q4_0 flash_attn=false ubatch=256`` prints those
    flags (the VRAM it priced), not llama.cpp's defaults."""
    from dataclasses import replace

    from sim.machine.vram.options import MemoryOptions

    a = replace(A, mem=MemoryOptions("q8_0", "q4_0", 256, False))
    c = _cand("n_cpu_moe", 3)
    assert server_line(c, a).endswith("-c 2048 -ub 256 -t 6 -ctk q8_0 -ctv q4_0 -fa off")
    assert "-ctk q8_0: K cache element type (the plan charged q8_0: 1.0625 bytes per element)" in explain(c, a)
    assert " -fa 0 -ctk q8_0 -ctv q4_0 -ub 256 " in bench_line([c], a, 0, 64)
