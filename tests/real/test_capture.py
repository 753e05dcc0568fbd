"""``traces capture`` end to end on tiny models: files, resume, input errors (CPU)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.real import need

need("torch")
need("transformers")

import real.model_loading as model_loading  # noqa: E402
import traces.io  # noqa: E402
from real.capture import main  # noqa: E402
from traces.errors import TraceError  # noqa: E402
from traces.io import load_trace  # noqa: E402
from sim.run.spec import RunSpec

BASE = dict(target="tiny:qwen3_moe", draft="tiny:dense", prompts="tiny:3", gamma="4",
            max_new_tokens="24", dtype="float32", device="cpu", progress="false")


def _run(out, **kw):
    return main({**BASE, "out": str(out), **kw})


def _content(path):
    """Everything a trace file says: metadata and arrays."""
    t = load_trace(path)
    arrays = {k: getattr(t, k) for k in ("experts", "weights", "next_pred", "prefill")}
    arrays.update(sd=None if t.sd is None else (t.sd.gamma, t.sd.experts, t.sd.accepted, t.sd.n_verified))
    return t.meta, arrays


def _same(a, b):
    assert a[0] == b[0]
    for key in a[1]:
        if key == "sd" and a[1][key] is not None:
            assert a[1][key][0] == b[1][key][0]
            for x, y in zip(a[1][key][1:], b[1][key][1:]):
                np.testing.assert_array_equal(x, y)
        else:
            np.testing.assert_array_equal(a[1][key], b[1][key])


@pytest.mark.parametrize("target", ["tiny:qwen3_moe", "tiny:deepseek_v2"])
def test_capture_writes_valid_traces(tmp_path, target):
    res = _run(tmp_path, target=target, prompts="tiny:2")
    assert res["written"] == 2 and res["skipped"] == 0 and 0 < res["mean_accepted"] < 4
    t = load_trace(tmp_path / "prompt_00001.npz")
    moe = 4 if target.endswith("qwen3_moe") else 3
    assert t.experts.shape == (24, moe, 4) and t.weights.shape == t.experts.shape
    assert t.prefill.shape == (16, moe, 4) and t.sd.gamma == 4 and t.sd.experts.shape[1:] == (5, moe, 4)
    assert 1 + int((t.sd.accepted + 1).sum()) == 24
    m = t.meta
    assert (m["source"], m["model"], m["draft"], m["precision"], m["prompt_id"]) == \
        ("captured", target, "tiny:dense", "float32", "tiny-1")
    assert (m["n_layers"], m["n_experts"], m["top_k"]) == (moe, 16, 4)
    assert (m["n_dense_layers"], m["n_shared_experts"]) == ((0, 0) if moe == 4 else (1, 2))
    for key in ("torch", "transformers", "device", "gamma", "schema_version"):
        assert key in m
    spec = m["model_spec"]                   # the target's config, derived as for model=hf:PATH
    assert (spec["n_layers"], spec["n_experts"], spec["top_k"]) == (moe, 16, 4)
    from sim.run.runner import run_one
    row = run_one(RunSpec.of(policy="llamacpp_sd", model=None, workload=None, trace=t, gen_tokens=8, gamma=4)).row
    assert row["model"] == target and row["n_steps"] > 0 and json.loads(row["model_spec"])["n_experts"] == 16


def test_sd_capture_routing_equals_ar_capture(tmp_path):
    _run(tmp_path / "sd", prompts="tiny:1", gamma="8")
    _run(tmp_path / "ar", prompts="tiny:1", ar="true")
    sd, ar = load_trace(tmp_path / "sd/prompt_00000.npz"), load_trace(tmp_path / "ar/prompt_00000.npz")
    assert ar.sd is None and ar.meta["gamma"] == 0 and ar.meta["draft"] is None
    np.testing.assert_array_equal(np.sort(sd.experts, -1), np.sort(ar.experts, -1))
    np.testing.assert_array_equal(np.sort(sd.prefill, -1), np.sort(ar.prefill, -1))


def test_resume_after_interruption_matches_uninterrupted_run(tmp_path, monkeypatch):
    _run(tmp_path / "whole")
    real_savez, calls = np.savez_compressed, []

    def interrupted_savez(f, **arrays):
        calls.append(1)
        if len(calls) == 2:  # the second prompt dies halfway through writing its file
            f.write(b"PK\x03\x04 partial")
            raise RuntimeError("simulated interruption")
        real_savez(f, **arrays)

    monkeypatch.setattr(traces.io.np, "savez_compressed", interrupted_savez)
    with pytest.raises(RuntimeError, match="simulated"):
        _run(tmp_path / "resumed")
    monkeypatch.setattr(traces.io.np, "savez_compressed", real_savez)
    assert sorted(p.name for p in (tmp_path / "resumed").iterdir()) == ["prompt_00000.npz"]
    (tmp_path / "resumed/prompt_00002.npz").write_bytes(b"truncated")  # a damaged file is redone
    res = _run(tmp_path / "resumed")
    assert (res["written"], res["skipped"]) == (2, 1)
    for i in range(3):
        name = f"prompt_{i:05d}.npz"
        _same(_content(tmp_path / "whole" / name), _content(tmp_path / "resumed" / name))
    assert _run(tmp_path / "resumed")["written"] == 0


def test_resume_refuses_a_different_run(tmp_path):
    _run(tmp_path, prompts="tiny:1")
    with pytest.raises(TraceError, match="another capture") as err:
        _run(tmp_path, prompts="tiny:1", gamma="8")
    assert err.value.field == "meta.gamma"


@pytest.fixture
def no_weights(monkeypatch):
    """Fail the test if any weights get loaded: errors must come first."""
    def refuse(*a, **k):
        raise AssertionError("weights were loaded before the input error was found")
    monkeypatch.setattr(model_loading, "load_model", refuse)


def _dense_checkpoint(path, vocab):
    from transformers import Qwen3Config
    path.mkdir()
    Qwen3Config(vocab_size=vocab, hidden_size=32, num_hidden_layers=1, num_attention_heads=2).save_pretrained(path)
    return str(path)


@pytest.mark.parametrize("case, field", [
    (dict(target="/no/such/model"), "target"),
    (dict(draft="./missing-draft"), "draft"),
    (dict(target="tiny:dense"), "target"),
    (dict(target="tiny:nope"), "target"),
    (dict(gamma="0"), "gamma"),
    (dict(gamma="65"), "gamma"),
    (dict(gamma="four"), "gamma"),
    (dict(max_new_tokens="0"), "max_new_tokens"),
    (dict(dtype="int8"), "dtype"),
    (dict(device="tpu"), "device"),
    (dict(prompts="tiny:0"), "prompts"),
    (dict(colour="red"), "colour"),
    (dict(draft=""), "draft"),
])
def test_bad_inputs_fail_before_any_work(tmp_path, no_weights, case, field):
    with pytest.raises(TraceError) as err:
        _run(tmp_path / "out", **case)
    assert err.value.field == field
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_vocab_mismatch_non_moe_empty_prompts_unwritable_out(tmp_path, no_weights):
    with pytest.raises(TraceError, match="vocabulary size 600 differs") as err:
        _run(tmp_path / "o1", draft=_dense_checkpoint(tmp_path / "d600", 600))
    assert err.value.field == "draft"
    with pytest.raises(TraceError, match="mixture-of-experts"):
        _run(tmp_path / "o2", target=_dense_checkpoint(tmp_path / "d512", 512))
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(TraceError, match="no prompts") as err:
        _run(tmp_path / "o3", prompts=str(tmp_path / "empty.jsonl"), tokenizer=_tokenizer(tmp_path))
    assert err.value.field == "prompts"
    (tmp_path / "a_file").write_text("x")
    with pytest.raises(TraceError, match="cannot write") as err:
        _run(tmp_path / "a_file" / "out")
    assert err.value.field == "out"
    with pytest.raises(TraceError, match="no tokenizer"):
        _run(tmp_path / "o4", prompts=_jsonl(tmp_path))


def _tokenizer(tmp_path):
    """A word-level tokenizer over 100 words, saved as a Hugging Face tokenizer folder."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(100)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path / "tok"
    if not path.exists():
        PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(path)
    return str(path)


def _jsonl(tmp_path):
    path = tmp_path / "prompts.jsonl"
    rows = [{"id": "q1", "prompt": "w1 w2 w3 w4"}, {"text": "w5 w6 w7 w8 w9"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


def test_local_checkpoint_with_text_prompts(tmp_path):
    """A saved checkpoint path as target, a tokenizer folder, and JSONL text prompts."""
    from real.tiny_models import build_tiny
    build_tiny("qwen3_moe").save_pretrained(tmp_path / "ckpt")
    res = _run(tmp_path / "out", target=str(tmp_path / "ckpt"), prompts=_jsonl(tmp_path),
               tokenizer=_tokenizer(tmp_path), max_new_tokens="12")
    assert res["written"] == 2
    t0, t1 = (load_trace(tmp_path / f"out/prompt_0000{i}.npz") for i in range(2))
    assert (t0.meta["prompt_id"], t1.meta["prompt_id"]) == ("q1", "1")
    assert (t0.meta["prompt_tokens"], t1.meta["prompt_tokens"]) == (4, 5)
    assert res["mean_accepted"] > 0  # the saved target still shares its tables with tiny:dense


def test_packages_import_without_torch():
    """``import real`` and ``import real.capture`` stay light: torch loads only when capturing."""
    import subprocess
    import sys
    code = "import sys, real, real.capture; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])
