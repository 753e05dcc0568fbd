"""Importers: recognised formats, filled rows, clear errors; the real files when present."""
from __future__ import annotations

import json

import numpy as np
import pytest

from traces.errors import TraceError
from traces.importers import fill_missing, import_trace
from traces.io import save_trace

from .helpers import random_routing, real_dir, small_trace


def _mixtral_npz(path, gaps=()):
    rng = np.random.default_rng(0)
    ex = random_routing(rng, 6, 32, 8, 2).astype(np.int8)
    for t, l in gaps:
        ex[t, l] = -1
    probs = np.full(ex.shape, 0.5, np.float32)
    np.savez(path, req_p0_experts=ex, req_p0_probs=probs, req_p0_layer_full=np.ones(32, bool),
             other_p3_experts=ex[:4], other_p3_probs=probs[:4])
    return ex


def test_fill_missing_uses_the_previous_token_or_the_next_for_a_leading_gap():
    ex = np.array([[[-1, -1]], [[1, 2]], [[-1, -1]], [[3, 4]], [[-1, -1]]], np.int16)
    w = np.arange(10, dtype=np.float32).reshape(5, 1, 2)
    got, gw, n = fill_missing(ex, w)
    assert n == 3
    assert got[:, 0].tolist() == [[1, 2], [1, 2], [1, 2], [3, 4], [3, 4]]
    assert gw[:, 0, 0].tolist() == [2, 2, 2, 6, 6]
    assert ex[0, 0, 0] == -1  # the input is not modified


def test_fill_missing_rejects_an_empty_layer():
    with pytest.raises(TraceError, match="layer 0 has no routing rows at all"):
        fill_missing(np.full((3, 1, 2), -1, np.int16))


def test_mixtral_npz_gives_one_trace_per_request_and_reports_fills(tmp_path):
    ex = _mixtral_npz(tmp_path / "m.npz", gaps=[(5, 3), (2, 7)])
    traces = import_trace(tmp_path / "m.npz")
    assert [t.meta["prompt_id"] for t in traces] == ["other_p3", "req_p0"]
    req = traces[1]
    assert req.meta["source"] == "imported" and req.meta["model"] == "mixtral_8x7b"
    assert req.meta["workload"] == "req" and req.meta["filled_rows"] == 2
    assert "2 missing (token, layer) rows" in req.meta["origin"] and req.meta["origin"].startswith("m.npz")
    assert req.experts[5, 3].tolist() == ex[4, 3].tolist() and req.experts[2, 7].tolist() == ex[1, 7].tolist()
    assert req.weights.shape == req.experts.shape
    assert traces[0].meta["filled_rows"] == 1 and traces[0].n_tokens == 4  # shares the gap at (2, 7)


def _row(dataset, pid, layer, t, experts):
    return json.dumps({"dataset": dataset, "problem_id": pid, "layer": layer, "experts": experts,
                       "gating_probs": [0.6, 0.4], "token_idx": t})


def test_routing_jsonl_groups_per_problem_and_fills_dropped_rows(tmp_path):
    lines = [_row("gsm8k", p, l, t, [(t + l) % 8, (t + l + 1) % 8])
             for p in (0, 1) for l in range(32) for t in range(3 + p) if not (p == 1 and l == 5 and t == 3)]
    path = tmp_path / "gsm8k_2_routing.jsonl"
    path.write_text("\n".join(lines) + "\n")
    traces = import_trace(path)
    assert [(t.meta["prompt_id"], t.n_tokens) for t in traces] == [("gsm8k_p0", 3), ("gsm8k_p1", 4)]
    assert traces[1].meta["filled_rows"] == 1
    assert traces[1].experts[3, 5].tolist() == traces[1].experts[2, 5].tolist()
    assert traces[0].experts[2, 4].tolist() == [6, 7]


def test_routing_jsonl_with_a_bad_line_names_the_line(tmp_path):
    path = tmp_path / "x_routing.jsonl"
    path.write_text(_row("qa", 0, 0, 0, [1, 2]) + "\n{\"dataset\": \"qa\"}\n")
    with pytest.raises(TraceError, match=r"x_routing\.jsonl: field 'line 2': not a routing row"):
        import_trace(path)


def test_empty_routing_jsonl(tmp_path):
    path = tmp_path / "x_routing.jsonl"
    path.write_text("\n")
    with pytest.raises(TraceError, match=r"x_routing\.jsonl: field '<rows>': holds no routing rows"):
        import_trace(path)


def test_routing_jsonl_with_an_impossible_layer(tmp_path):
    path = tmp_path / "x_routing.jsonl"
    path.write_text(_row("qa", 0, 40, 0, [1, 2]) + "\n")
    with pytest.raises(TraceError, match=r"does not fit 32 layers, top-2"):
        import_trace(path)


def test_qwen3_npz_keeps_decode_rows_only(tmp_path):
    rng = np.random.default_rng(1)
    ex = random_routing(rng, 5, 48, 128, 8)
    ex[0, :47] = -1  # the prefill step logs the last layer only
    np.savez(tmp_path / "q.npz", experts_p0=ex, phase_p0=np.array([0, 1, 1, 1, 1], np.int8),
             prompt_id_p0=np.array("set:007"))
    tr = import_trace(tmp_path / "q.npz")
    assert tr.n_tokens == 4 and tr.meta["model"] == "qwen3_30b_a3b" and tr.meta["prompt_id"] == "set:007"
    np.testing.assert_array_equal(tr.experts, ex[1:])
    assert "4 decode rows kept, 1 prefill rows dropped" in tr.meta["origin"]


def test_a_saved_trace_is_loaded_as_is(tmp_path):
    path = save_trace(small_trace(), tmp_path / "t.npz")
    assert import_trace(path).meta["model"] == "tiny"


def test_unknown_formats_are_clear_errors(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(TraceError, match=r"notes\.txt: field '<format>': unknown trace format; recognised formats: "
                                         r"mixtral_decode_topk\.npz"):
        import_trace(tmp_path / "notes.txt")
    np.savez(tmp_path / "odd.npz", stuff=np.zeros(3))
    with pytest.raises(TraceError, match=r"odd\.npz: field '<keys>': unknown \.npz layout \(keys \['stuff'\]\)"):
        import_trace(tmp_path / "odd.npz")
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(TraceError, match=r"bad\.npz: field '<file>': not a readable \.npz archive"):
        import_trace(tmp_path / "bad.npz")
    with pytest.raises(TraceError, match=r"field '<file>': no such file"):
        import_trace(tmp_path / "missing.npz")
    with pytest.raises(TraceError, match=r"give one file, not a folder"):
        import_trace(tmp_path)


def test_real_mixtral_jsonl_and_npz_agree():
    folder = real_dir("Mario928-speculative-moe")
    from_npz = {t.meta["prompt_id"]: t for t in import_trace(folder / "mixtral_decode_topk.npz")}
    from_jsonl = import_trace(folder / "humaneval_2_routing.jsonl") + import_trace(folder / "gsm8k_2_routing.jsonl")
    assert sorted(from_npz) == sorted(t.meta["prompt_id"] for t in from_jsonl)
    for t in from_jsonl:
        np.testing.assert_array_equal(t.experts, from_npz[t.meta["prompt_id"]].experts)
        np.testing.assert_allclose(t.weights, from_npz[t.meta["prompt_id"]].weights)
    assert sum(t.meta["filled_rows"] for t in from_jsonl) == 52  # README: 52 of 18,720 rows dropped


def test_real_qwen3_import_metadata():
    tr = import_trace(real_dir("everett6-moe-prefetch") / "qwen3_30b_a3b_routes.npz")
    assert tr.meta["prompt_id"] == "github_issues:00767" and tr.meta["filled_rows"] == 0
    assert tr.experts.shape == (199, 48, 8)
