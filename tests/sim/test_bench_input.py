"""Reading llama-bench output and llama.cpp timing lines; mapping rows to simulated runs; bad files."""
import json

import pytest

from sim.machine.specs import ConfigError
from sim.fidelity.bench_input import read_bench
from sim.fidelity.bench_rows import bench_runs, cpu_expert_layers, placement, quant_of, quant_of_file
from sim.fidelity.machine_command import calibrate_bench

MODEL_TYPE = "qwen3moe 30B.A3B Q4_K - Medium"


def _row(**kw) -> dict:
    row = {"cpu_info": "AMD Ryzen 9 7950X 16-Core Processor", "gpu_info": "NVIDIA GeForce RTX 4090",
           "backends": "CUDA", "model_type": MODEL_TYPE, "model_n_params": 30532122624, "n_threads": 16,
           "n_gpu_layers": 99, "n_cpu_moe": 0, "tensor_buft_overrides": "none", "n_prompt": 0, "n_gen": 128,
           "n_depth": 0, "avg_ts": 40.0}
    row.update(kw)
    return row


def _json(tmp_path, rows, name="b.json"):
    p = tmp_path / name
    p.write_text(json.dumps(rows))
    return p


def test_markdown_as_copied_from_a_terminal(tmp_path):
    p = tmp_path / "b.md"
    p.write_text("""ggml_cuda_init: found 1 CUDA devices:
| model                          |       size |     params | backend    | ngl | n_cpu_moe |            test |                  t/s |
| ------------------------------ | ---------: | ---------: | ---------- | --: | --------: | --------------: | -------------------: |
| qwen3moe 30B.A3B Q3_K - Medium |  13.70 GiB |    30.53 B | CUDA       |  99 |        10 |           pp512 |        378.46 ± 1.43 |
| qwen3moe 30B.A3B Q3_K - Medium |  13.70 GiB |    30.53 B | CUDA       |  99 |        10 |           tg128 |         11.09 ± 0.00 |
| qwen3moe 30B.A3B Q3_K - Medium |  13.70 GiB |    30.53 B | CUDA       |  99 |        20 |    tg128 @ d4096 |          9.50 ± 0.10 |

build: 08a216474 (6457)
""")
    rows = read_bench(p)
    assert [(r["n_prompt"], r["n_gen"], r["n_depth"], r["avg_ts"]) for r in rows] == \
        [(512, 0, 0, 378.46), (0, 128, 0, 11.09), (0, 128, 4096, 9.5)]
    assert rows[0]["model_n_params"] == pytest.approx(30.53e9) and rows[0]["n_cpu_moe"] == "10"
    model, quant, runs, notes = bench_runs(rows, p)
    assert (model, quant) == ("qwen3_30b_a3b", "q3_k_m")
    assert [(r.kind, r.run["policy_args"], r.run["prompt_tokens"]) for r in runs] == \
        [("pp", {"n_cpu_moe": 10}, 512), ("tg", {"n_cpu_moe": 10}, 0), ("tg", {"n_cpu_moe": 20}, 4096)]


def test_old_test_names_and_mixed_rows(tmp_path):
    p = tmp_path / "b.md"
    p.write_text("| model | params | ngl | test | t/s |\n|---|---|---|---|---|\n"
                 f"| {MODEL_TYPE} | 30.53 B | 20 | pp 512 | 100.5 ± 2 |\n"
                 f"| {MODEL_TYPE} | 30.53 B | 20 | pp512+tg128 | 30.0 ± 1 |\n")
    _, _, runs, notes = bench_runs(read_bench(p), p)
    assert [(r.kind, r.run["policy_args"]) for r in runs] == [("pp", {"gpu_layers": 20})]
    assert len(notes) == 1 and "row 2" in notes[0] and "skipped" in notes[0]


def test_timing_lines_take_the_command_line_flags(tmp_path):
    p = tmp_path / "server.log"
    p.write_text("""$ llama-server -m /m/Qwen3-30B-A3B-Instruct-2507-Q4_K_M.gguf -ngl 99 -ot "blk\\.(1[2-9]|2[0-9])\\.ffn_.*_exps=CPU" -t 12 -ctk q8_0
prompt eval time =     631.15 ms /   512 tokens (    1.23 ms per token,   811.22 tokens per second)
       eval time =    2000.00 ms /    64 tokens (   31.25 ms per token,    32.00 tokens per second)
""")
    rows = read_bench(p)
    model, quant, runs, notes = bench_runs(rows, p, model="qwen3_30b_a3b")
    assert quant == "q4_k_m"
    assert [(r.kind, r.measured_tok_s, r.threads, r.run["policy_args"]) for r in runs] == \
        [("pp", 811.22, 12, {"n_cpu_moe": 18}), ("tg", 32.0, 12, {"n_cpu_moe": 18})]
    assert any("layers [12, 13" in n for n in notes) and any("type_k q8_0" in n for n in notes)


def test_ot_patterns_and_placement():
    assert cpu_expert_layers(r"blk\.(1[2-9]|2[0-9])\.ffn_.*_exps=CPU", 48) == set(range(12, 30))
    assert cpu_expert_layers("exps=CPU", 48) == set(range(48))
    # the first matching pattern decides (llama.cpp's loader breaks on it): the GPU exception goes first
    assert cpu_expert_layers(r"blk\.4[0-7]\.ffn_.*=CUDA0;.ffn_.*_exps.=CPU", 48) == set(range(40))
    assert cpu_expert_layers(r".ffn_.*_exps.=CPU;blk\.4[0-7]\.ffn_.*=CUDA0", 48) == set(range(48))
    assert cpu_expert_layers(r"blk\.\d+\.attn_.*=CPU", 48) == set()
    assert placement({"_row": 1, "n_gpu_layers": -1, "n_cpu_moe": 30}, 48, "f") == ({"n_cpu_moe": 30}, ())
    assert placement({"_row": 1, "n_gpu_layers": 20}, 48, "f") == ({"gpu_layers": 20}, ())
    assert placement({"_row": 1, "n_gpu_layers": 49, "n_cpu_moe": 5}, 48, "f") == ({"n_cpu_moe": 5}, ())
    skipped, note = placement({"_row": 3, "n_gpu_layers": 30, "n_cpu_moe": 40}, 48, "f")
    assert skipped is None and "row 3" in note[0]


def test_quant_names():
    assert [quant_of(t) for t in (MODEL_TYPE, "gpt-oss 20B MXFP4 MoE", "qwen3moe 30B.A3B Q4_0", "llama 8x7B Q8_0")] \
        == ["q4_k_m", "mxfp4", "q4_0", "q8_0"]
    assert quant_of_file("Qwen3-30B-A3B-UD-Q2_K_XL.gguf") == "q2_k"
    assert quant_of_file("qwen3_30b_a3b.gguf") is None


BAD = [
    ("model", [_row(), _row(n_cpu_moe=20)], {"model": "qwen3_235b_a22b"}, "row 1: field model_n_params"),
    ("machines", [_row(), _row(), _row(gpu_info="NVIDIA GeForce RTX 3090")], {}, "row 3: field gpu_info"),
    ("dense", [_row(model_type="llama 7B Q4_0", model_n_params=6738415616)], {}, "row 1: field model_type"),
    ("mixed", [_row(), _row(model_type="qwen3moe 235B.A22B Q2_K - Medium")], {}, "row 2: field model_type"),
    ("not run", [_row(), _row(n_cpu_moe=24), _row(n_cpu_moe=36, avg_ts=0)], {}, "row 3: field avg_ts"),
    ("no rate", [_row(), {k: v for k, v in _row().items() if k != "avg_ts"}], {}, "row 2: missing field avg_ts"),
    ("no n_gen", [_row(), {k: v for k, v in _row().items() if k != "n_gen"}], {}, "row 2: missing field n_gen"),
]


@pytest.mark.parametrize("case,rows,opts,message", BAD, ids=[b[0] for b in BAD])
def test_bad_bench_files_name_row_and_field_and_write_nothing(tmp_path, case, rows, opts, message):
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as err:
        calibrate_bench({"bench": str(_json(tmp_path, rows)), "out": str(out), **opts})
    assert message in str(err.value) and "\n" not in str(err.value)
    assert not (out / "machine.yaml").exists()


def test_out_inside_conf_is_refused(tmp_path):
    from sim.paths import CONF_DIR

    with pytest.raises(ConfigError, match="outside conf/"):
        calibrate_bench({"bench": str(_json(tmp_path, [_row()])), "out": str(CONF_DIR / "mybox")})
    assert not (CONF_DIR / "mybox").exists()


def test_empty_and_unknown_files(tmp_path):
    empty = tmp_path / "empty.json"
    empty.write_text("  \n")
    with pytest.raises(ConfigError, match="empty"):
        read_bench(empty)
    other = tmp_path / "x.txt"
    other.write_text("hello\nworld\n")
    with pytest.raises(ConfigError, match="not llama-bench output"):
        read_bench(other)
    md = tmp_path / "b.md"
    md.write_text("| model | ngl | test |\n|--|--|--|\n| m | 99 | tg128 |\n")
    with pytest.raises(ConfigError, match="no 't/s' column"):
        read_bench(md)


def test_command_line_errors_are_one_line_and_json_has_the_fields(tmp_path, capsys):
    from sim.commands.fidelity import main

    bad = _json(tmp_path, [_row(avg_ts=0)], "bad.json")
    with pytest.raises(SystemExit) as code:
        main("calibrate", [f"bench={bad}", f"out={tmp_path / 'o'}"])
    err = capsys.readouterr().err
    assert code.value.code == 2 and err.count("\n") == 1 and "row 1: field avg_ts" in err
    good = _json(tmp_path, [_row(n_cpu_moe=12, n_gen=16, avg_ts=50.0), _row(n_cpu_moe=36, n_gen=16, avg_ts=30.0)])
    main("calibrate", [f"bench={good}", f"out={tmp_path / 'o'}", "json=true", "host=desktop_ddr5_2ch", "link=pcie4_x16"])
    res = json.loads(capsys.readouterr().out)
    assert [r["measured_tok_s"] for r in res["rows"]] == [50.0, 30.0]
    assert all(r["predicted_tok_s"] > 0 and r["loo_tok_s"] > 0 for r in res["rows"])
    assert res["loo_median_abs_error"] >= 0 and not res["parameters"]["pcie_h2d_gbs"]["fitted"]
    assert (tmp_path / "o" / "machine.yaml").exists()


def test_machine_knob_replaces_the_hardware(tmp_path):
    from omegaconf import OmegaConf

    from sim.commands.common import specs_of
    from sim.fidelity.machine_file import machine_hardware

    path = tmp_path / "machine.yaml"
    path.write_text("kind: calibrated_machine\ngpu: rtx4090\nhost: desktop_ddr5_2ch\nlink: pcie4_x8\n"
                    "hardware: {cpu_mem_eff: 0.5, pcie_h2d_gbs: 9.0}\n")
    cfg = OmegaConf.create({"hardware": {"name": "rtx4090_pcie4"}, "model": {"name": "qwen3_30b_a3b"},
                            "draft": {"name": "qwen3_4b_fp8"}, "runtime": None, "machine": str(path)})
    hw = specs_of(cfg)["hardware"]
    assert hw == machine_hardware(path) and hw["link"] == "pcie4_x8" and hw["pcie_h2d_gbs"] == 9.0
    from sim.machine import specs as config
    spec = config.hardware(hw, runtime="llama_cpp")
    assert (spec.cpu_mem_eff, spec.pcie_h2d_gbs) == (0.5, 9.0) and "@calibrated-" in spec.name
    path.write_text("kind: calibrated_machine\ngpu: rtx4090\nhost: desktop_ddr5_2ch\nlink: pcie4_x8\n"
                    "hardware: {cpu_mem_eff: -1}\n")
    with pytest.raises(ConfigError, match="hardware.cpu_mem_eff=-1"):
        machine_hardware(path)
