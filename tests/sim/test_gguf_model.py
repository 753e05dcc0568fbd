"""model=gguf:PATH: specs read from small GGUF files written here (sizes checked by hand from ggml's blocks)."""
import dataclasses
import os
import sys

import pytest

from sim.machine import specs as config
from sim.machine.specs import ConfigError
from sim.run.identity import spec_record
from sim.machine.memory_plan import plan_memory
from sim.machine.gguf_file import GgufError, read_header
from sim.machine.gguf_model import from_path, hf_fields
from sim.machine.hf_config import derive
from tests.sim.gguf_files import deepseek2, gpt_oss, gqa_moe, nbytes, qwen3moe, write_gguf

Q4K, Q6K, Q8_0 = 144 / 256, 210 / 256, 34 / 32       # bytes per weight: block_q4_K, block_q6_K, block_q8_0


def test_qwen3moe_fields_and_byte_sizes(tmp_path):
    qwen3moe(tmp_path / "Tiny-Q4_K_M.gguf", tokens=100)
    m = config.model(f"gguf:{tmp_path / 'Tiny-Q4_K_M.gguf'}")
    assert (m.name, m.n_layers, m.n_dense_layers, m.n_experts, m.top_k, m.n_shared_experts) == ("gguf:Tiny-Q4_K_M", 2, 0, 4, 2, 0)
    assert (m.hidden, m.moe_intermediate, m.attention, m.kv_bytes_per_token) == (256, 256, "gqa", 2 * 2 * 2 * 64 * 2)
    # one expert: gate + up in Q4_K, down in Q6_K (layer 0) or Q4_K (layer 1); the mean of the two layers
    gate = 256 * 256 * Q4K
    assert m.file_expert_bytes == m.expert_bytes == (4 * gate + 256 * 256 * Q6K + gate) / 2 == 119040
    assert m.expert_params == 3 * 256 * 256
    per_layer = 2 * 4 * 256 + 256 * 256 * Q8_0 + 256 * 128 * Q8_0 + 256 * 128 * Q6K + 256 * 256 * Q8_0 + 4 * 64 * 2 + 4 * 256 * 4
    embed, head = 256 * 512 * Q4K, 256 * 512 * Q6K
    assert (m.file_embed_bytes, m.file_head_bytes) == (embed, head) == (73728, 107520)
    assert m.file_non_expert_bytes == 2 * per_layer + embed + 4 * 256 + head == 597504
    assert m.non_expert_params == 2 * (256 + 65536 + 32768 + 32768 + 65536 + 64 + 64 + 256 + 1024) + 131072 + 256 + 131072
    assert m.attn_params_per_layer == 256 * 256 * 2 + 256 * 128 * 2          # q, o + k, v: the file's projections
    assert (m.quant, m.quant_dense, m.file_expert_types) == ("q4_k_m", "q8_0", "q4_k 77% + q6_k 23%")
    assert m.bytes_per_param * m.non_expert_params == pytest.approx(597504)


@pytest.mark.parametrize("mla_keys", [True, False])
def test_deepseek2_mla_shared_expert_and_dense_layer(tmp_path, mla_keys):
    deepseek2(tmp_path / "ds.gguf", mla_keys=mla_keys)
    m = config.model(f"gguf:{tmp_path / 'ds.gguf'}")
    assert (m.n_layers, m.n_dense_layers, m.n_experts, m.n_shared_experts, m.attention) == (2, 1, 8, 1, "mla")
    assert (m.shared_intermediate, m.dense_intermediate) == (256, 512)
    assert m.kv_bytes_per_token == 3 * (128 + 32) * 2                         # latent + rope key, 16 bit, 3 layers
    assert m.attn_params_per_layer == 256 * 4 * 96 + 256 * 160 + 128 * 4 * 128 + 4 * 64 * 256
    assert m.file_expert_bytes == 3 * 256 * 256 * Q4K == 110592
    attn = 2 * 256 * 4 + 256 * 384 * Q8_0 + 256 * 160 * Q8_0 + 128 * 4 + 2 * 32768 * 2 + 256 * 256 * Q8_0
    dense, moe = 3 * 256 * 512 * Q8_0, 256 * 8 * 4 + 3 * 256 * 256 * Q8_0
    assert m.file_non_expert_bytes == 3 * attn + dense + 2 * moe + 73728 + 1024 + 107520 == 2087936


def test_gpt_oss_mxfp4_experts_with_biases_and_sliding_window(tmp_path):
    gpt_oss(tmp_path / "g.gguf")
    m = config.model(f"gguf:{tmp_path / 'g.gguf'}")
    assert (m.quant, m.file_expert_types, m.n_layers, m.top_k) == ("mxfp4", "mxfp4", 2, 2)
    assert m.file_expert_bytes == 3 * 256 * 256 * 17 // 32 + 3 * 256 * 4 == 107520   # block_mxfp4: 17 B / 32
    assert m.expert_params == 3 * 256 * 256 + 3 * 256
    assert (m.kv_bytes_per_token, m.kv_swa_bytes_per_token, m.sliding_window) == (512, 512, 128)


@pytest.mark.parametrize("write", [qwen3moe, deepseek2, lambda p: deepseek2(p, mla_keys=False), gpt_oss])
def test_file_weights_equal_the_config_json_counts(tmp_path, write):
    """The weights counted in the file equal what hf_config derives from the same shapes (the module
    layout of transformers' modeling files): the two mappings agree tensor for tensor."""
    write(tmp_path / "m.gguf")
    h = read_header(tmp_path / "m.gguf")
    arch = h.meta["general.architecture"]
    counted, derived = from_path(tmp_path / "m.gguf"), derive(hf_fields(h, arch), "x")
    for key in ("expert_params", "non_expert_params", "attn_params_per_layer", "lm_head_params", "embed_params",
                "kv_bytes_per_token", "kv_swa_bytes_per_token", "n_layers", "n_dense_layers"):
        assert counted[key] == derived[key], key


@pytest.mark.parametrize("arch, kw, shape", [
    ("qwen2moe", dict(shared_ffn=512), (2, 0, 1, 512)),
    ("llama", dict(per_expert=True, meta={"expert_feed_forward_length": None, "feed_forward_length": 256}),
     (2, 0, 0, 0)),                                                           # Mixtral, per-expert tensors
    ("glm4moe", dict(dense_layers=1, layers=3, extra_layers=1, meta={"leading_dense_block_count": 1}), (2, 1, 0, 0)),
    ("olmoe", dict(head_norms=True), (2, 0, 0, 0)),
    ("phimoe", {}, (2, 0, 0, 0)),
])
def test_other_families(tmp_path, arch, kw, shape):
    gqa_moe(tmp_path / "m.gguf", arch, **kw)
    m = config.model(f"gguf:{tmp_path / 'm.gguf'}")
    assert (m.n_layers, m.n_dense_layers, m.n_shared_experts, m.shared_intermediate) == shape
    assert (m.expert_params, m.moe_intermediate, m.n_experts) == (3 * 256 * 256, 256, 4)
    gate, down6 = 256 * 256 * Q4K, 256 * 256 * Q6K        # Q6_K down in layer 0 only (a dense layer in glm4moe's case)
    assert m.file_expert_bytes == (3 * gate if arch == "glm4moe" else (4 * gate + down6 + gate) / 2)


def test_prediction_layers_are_left_out(tmp_path):
    """glm4moe's nextn block holds experts and attention; llama.cpp skips it and so do the sizes."""
    gqa_moe(tmp_path / "a.gguf", "glm4moe", layers=2)
    gqa_moe(tmp_path / "b.gguf", "glm4moe", layers=2, extra_layers=1)
    a, b = (config.model(f"gguf:{tmp_path / n}") for n in ("a.gguf", "b.gguf"))
    assert (b.n_layers, b.file_non_expert_bytes, b.file_expert_bytes) == (a.n_layers, a.file_non_expert_bytes, a.file_expert_bytes)


def test_split_file_reads_every_shard(tmp_path):
    qwen3moe(tmp_path / "one.gguf")
    shards = qwen3moe(tmp_path / "m.gguf", split_max_tensors=10)
    assert [p.name for p in shards] == [f"m-0000{i}-of-00003.gguf" for i in (1, 2, 3)]      # 27 tensors
    one, split = from_path(tmp_path / "one.gguf"), from_path(shards[0])
    assert {k: v for k, v in split.items() if k not in ("name", "source")} == {
        k: v for k, v in one.items() if k not in ("name", "source")}
    assert split["name"] == "gguf:m" and "3 shards" in split["source"]
    with pytest.raises(GgufError, match="give the first shard"):
        read_header(shards[1])
    shards[1].unlink()
    with pytest.raises(GgufError, match=r"m-00001-of-00003.gguf: split model of 3 shards; missing m-00002-of-00003.gguf$"):
        read_header(shards[0])


def test_unsupported_dense_missing_and_corrupt_files_are_one_line(tmp_path):
    gqa_moe(tmp_path / "j.gguf", "jamba")
    write_gguf(tmp_path / "d.gguf", "llama", {"block_count": 2, "embedding_length": 256},
               [("blk.0.ffn_up.weight", "q8_0", (256, 256))])
    qwen3moe(tmp_path / "t.gguf", tokens=50)
    whole = (tmp_path / "t.gguf").read_bytes()
    for n, cut in (("half", len(whole) // 2), ("header", 300)):
        (tmp_path / f"{n}.gguf").write_bytes(whole[:cut])
    (tmp_path / "x.gguf").write_bytes(b"not a gguf file at all")
    bad = bytearray(whole)                      # the token count (after key, value type, item type) corrupted
    at = bad.find(b"tokenizer.ggml.tokens") + len("tokenizer.ggml.tokens") + 8
    bad[at:at + 8] = (10 ** 15).to_bytes(8, "little")
    (tmp_path / "count.gguf").write_bytes(bytes(bad))
    gqa_moe(tmp_path / "k.gguf", "deepseek2")                                  # MLA keys missing
    gqa_moe(tmp_path / "s.gguf", meta={"attention.head_count": "four"})         # a key of the wrong type
    cases = {"j": r"architecture 'jamba' is not supported; supported: qwen3moe, qwen2moe, deepseek2, gpt-oss",
             "d": r"a dense model \(architecture 'llama', no routed experts\)",
             "half": "not a readable GGUF file", "header": "not a readable GGUF file",
             "x": "not a readable GGUF file", "missing": "no such file",
             "count": r"not a readable GGUF file \(a string array of 1000000000000000 items runs past the end",
             "k": "missing metadata deepseek2.rope.dimension_count, deepseek2.attention.kv_lora_rank$",
             "s": r"unusable qwen3moe metadata \(ValueError: "}
    with pytest.raises(ConfigError, match=r"^model=gguf: give the file, model=gguf:PATH"):
        config.model(config.load_preset("model", "gguf"))
    for name, msg in cases.items():
        path = tmp_path / f"{name}.gguf"
        with pytest.raises(ConfigError, match=f"^gguf:{path}: {msg}") as info:
            config.model(f"gguf:{path}")
        assert "\n" not in str(info.value)


def test_header_reader_agrees_with_the_stock_reader(tmp_path):
    import gguf

    qwen3moe(tmp_path / "q.gguf", tokens=30)
    ours, stock = read_header(tmp_path / "q.gguf"), gguf.GGUFReader(tmp_path / "q.gguf")
    assert [(t.name, t.ggml_type, t.n_elements, t.n_bytes) for t in ours.tensors] == [
        (t.name, t.tensor_type.name.lower(), int(t.n_elements), int(t.n_bytes)) for t in stock.tensors]
    strings = [k for k, f in stock.fields.items() if [t.name for t in f.types] == ["ARRAY", "STRING"]]
    assert strings == ["tokenizer.ggml.tokens", "tokenizer.ggml.merges"]
    for key, field in stock.fields.items():
        if key in strings:                              # string arrays: skipped, their length kept
            assert ours.meta[key] == [] and ours.array_len[key] == len(field.contents()), key
        else:
            assert ours.meta[key] == field.contents(), key
    assert ours.array_len == {"tokenizer.ggml.tokens": 30, "tokenizer.ggml.token_type": 30, "tokenizer.ggml.merges": 29}
    assert [t.n_bytes for t in ours.tensors] == [nbytes(t.ggml_type, t.shape) for t in ours.tensors]


def test_quant_override_replaces_the_file_sizes(tmp_path):
    qwen3moe(tmp_path / "q.gguf")
    path = f"gguf:{tmp_path / 'q.gguf'}"
    file = config.model(path)
    same = config.model(path, quant="q4_k_m", quant_dense="q8_0")   # the file's names, but the format whole
    assert (same.expert_bytes, same.bytes_per_param) == (int(3 * 65536 * (2 * Q4K + (Q4K + Q6K) / 2) / 3), Q8_0)
    assert file.bytes_per_param != Q8_0
    q8 = config.model(path, quant="q8_0")
    assert (q8.expert_bytes, q8.bytes_per_param, q8.file_expert_types) == (int(3 * 65536 * Q8_0), Q8_0, "")
    mapped = config.model({"gguf_path": str(tmp_path / "q.gguf"), "quant": "q6_k", "name": None})
    assert (mapped.expert_bytes, mapped.bytes_per_param) == (int(3 * 65536 * Q6K), file.bytes_per_param)


def test_memory_plan_and_records_use_the_file_sizes(tmp_path):
    qwen3moe(tmp_path / "q.gguf")
    m = config.model(f"gguf:{tmp_path / 'q.gguf'}")
    plan = plan_memory(config.hardware("rtx4090_pcie4"), m, config.draft("none"), 0.5)
    assert (plan.non_expert, plan.expert_bytes, plan.n_slots) == (pytest.approx(597504), 119040, 4)
    assert "experts q4_k 77% + q6_k 23%" in plan.report()
    assert spec_record(m)["file_expert_bytes"] == 119040
    preset = config.model("qwen3_30b_a3b")
    assert not [k for k in spec_record(preset) if k.startswith("file_")]
    assert dataclasses.replace(preset, file_expert_bytes=0).expert_bytes == 9_437_184   # presets unchanged


def test_command_line_rewrites_gguf_paths():
    from sim.__main__ import expand_hf

    assert expand_hf(["model=gguf:/m/A-00001-of-00002.gguf", "model=hf:/c", "gpu=x"]) == [
        "model=gguf", "model.gguf_path=/m/A-00001-of-00002.gguf", "model=hf", "model.hf_path=/c", "gpu=x"]


def _main(monkeypatch, capsys, *args):
    from sim.__main__ import main

    monkeypatch.setattr(sys, "argv", ["sim", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_run_and_plan_commands_take_a_gguf_file(tmp_path, monkeypatch, capsys):
    """A 0.16 GiB file (sparse on disk): 4 layers of 32 experts, hidden 1024, a 32k vocabulary."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "Mid-Q4_K_M.gguf"
    gqa_moe(path, "qwen3moe", layers=4, hidden=1024, experts=32, ffn=512, vocab=32768)
    m = config.model(f"gguf:{path}")
    code, out, err = _main(monkeypatch, capsys, "run", f"model=gguf:{path}", "policy=llamacpp", "gen_tokens=8",
                           "policy.n_cpu_moe=2", f"out={tmp_path / 'out'}")
    assert code in (0, None), err
    assert f"one expert {m.file_expert_bytes / 2**20:.2f} MiB" in out
    assert f"experts {m.file_expert_types}, GQA attention)" in out
    assert f"token embedding in host memory {m.file_embed_bytes / 2**30:.2f} GiB" in out
    assert m.file_expert_types == "q4_k 88% + q6_k 12%"       # 11 Q4_K gate/up/down tensors, one Q6_K down
    assert f"gguf[gguf_path={path}]" in out                 # the model column, as model=hf: labels it
    code, out, err = _main(monkeypatch, capsys, "run", f"model=gguf:{tmp_path / 'nope.gguf'}", f"out={tmp_path / 'o2'}")
    assert code == 2 and err.strip() == f"error: gguf:{tmp_path / 'nope.gguf'}: no such file"
    assert os.path.exists(tmp_path / "out" / "results.parquet")
    code, out, err = _main(monkeypatch, capsys, "plan", f"model=gguf:{path}", "engines=llama_cpp", "gpu=rtx2080",
                           f"out={tmp_path / 'plan'}")
    assert code in (0, None), err
    assert f"plan: gguf[gguf_path={path}] ({m.expert_quant} experts, {m.dense_quant} rest)" in out
    assert f"llama-server -m {path} -ngl" in out                             # the engine command names the file


def test_llamacpp_model_buffer_is_the_files_weights_less_the_host_embedding(tmp_path):
    """Under llama.cpp's placement a GGUF model's buffer holds exactly the file's non-expert bytes
    without the token embedding (kept in host memory); ``-ngl`` leaving k of L blocks on the CPU
    removes k/L of the per-layer weights and the output head."""
    from sim.machine.vram.llamacpp import model_parts

    path = tmp_path / "Mid-Q4_K_M.gguf"
    gqa_moe(path, "qwen3moe", layers=4, hidden=1024, experts=32, ffn=512, vocab=32768)
    m = config.model(f"gguf:{path}")
    parts, embed = model_parts(m, 0)
    assert embed == m.file_embed_bytes > 0
    assert sum(b for _, b in parts) + embed == pytest.approx(m.file_non_expert_bytes)
    head = m.file_head_bytes or m.file_embed_bytes
    per_layer = m.file_non_expert_bytes - m.file_embed_bytes - m.file_head_bytes
    parts1, _ = model_parts(m, 1)
    assert sum(b for _, b in parts1) == pytest.approx(per_layer * 3 / 4)
    assert dict(parts)["output head"] == head
