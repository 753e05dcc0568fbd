"""Loading, validation errors (one test per error path, each with its message), round trip, atomic writes."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from traces.errors import TraceError
from traces.io import atomic_write_bytes, list_traces, load_trace, save_trace
from traces.schema import SDRecord, Trace

from .helpers import meta, small_trace, write_raw


def _experts(t=4, l=3, k=2, e=8):
    return small_trace(tokens=t, n_layers=l, n_experts=e, top_k=k).experts


def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(TraceError, match=r"nope\.npz: field '<file>': no such file"):
        load_trace(tmp_path / "nope.npz")


def test_truncated_file_is_reported_as_unreadable(tmp_path):
    path = save_trace(small_trace(tokens=64), tmp_path / "t.npz")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match=r"field '<file>': not a readable trace archive \(truncated"):
        load_trace(path)


def test_missing_metadata_record(tmp_path):
    path = write_raw(tmp_path / "t.npz", None, experts=_experts())
    with pytest.raises(TraceError, match=r"field 'meta': missing metadata record"):
        load_trace(path)


def test_missing_metadata_key_names_the_key(tmp_path):
    m = meta()
    del m["top_k"]
    path = write_raw(tmp_path / "t.npz", m, experts=_experts())
    with pytest.raises(TraceError, match=r"field 'meta\.top_k': missing metadata \(required: .*top_k"):
        load_trace(path)


def test_metadata_that_is_not_json(tmp_path):
    path = write_raw(tmp_path / "t.npz", "{not json", experts=_experts())
    with pytest.raises(TraceError, match=r"field 'meta': not valid JSON"):
        load_trace(path)


def test_unknown_schema_version(tmp_path):
    path = write_raw(tmp_path / "t.npz", meta(schema_version=99), experts=_experts())
    with pytest.raises(TraceError, match=r"field 'meta\.schema_version': unknown schema version 99"):
        load_trace(path)


def test_unknown_source(tmp_path):
    path = write_raw(tmp_path / "t.npz", meta(source="dreamed"), experts=_experts())
    with pytest.raises(TraceError, match=r"field 'meta\.source': 'dreamed' is not one of"):
        load_trace(path)


def test_missing_routing_array(tmp_path):
    path = write_raw(tmp_path / "t.npz", meta(), weights=np.zeros((2, 3, 2), np.float32))
    with pytest.raises(TraceError, match=r"field 'experts': missing routing array"):
        load_trace(path)


def test_wrong_shape(tmp_path):
    path = write_raw(tmp_path / "t.npz", meta(), experts=_experts(k=3))
    with pytest.raises(TraceError, match=r"field 'experts': shape \(4, 3, 3\), expected \[T, 3, 2\]"):
        load_trace(path)


def test_expert_id_out_of_range(tmp_path):
    ex = _experts()
    ex[2, 1, 0] = 8
    path = write_raw(tmp_path / "t.npz", meta(), experts=ex)
    with pytest.raises(TraceError,
                       match=r"field 'experts': expert id 8 out of range 0\.\.7 \(token 2, layer 1, slot 0\)"):
        load_trace(path)


def test_negative_id_is_out_of_range_in_routing(tmp_path):
    ex = _experts()
    ex[0, 0, 1] = -1
    path = write_raw(tmp_path / "t.npz", meta(), experts=ex)
    with pytest.raises(TraceError, match=r"expert id -1 out of range 0\.\.7"):
        load_trace(path)


def test_duplicate_id_in_a_row(tmp_path):
    ex = _experts()
    ex[3, 2] = [5, 5]
    path = write_raw(tmp_path / "t.npz", meta(), experts=ex)
    with pytest.raises(TraceError,
                       match=r"field 'experts': repeated expert id in one top-k row \(token 3, layer 2\): \[5, 5\]"):
        load_trace(path)


def test_non_integer_dtype(tmp_path):
    path = write_raw(tmp_path / "t.npz", meta(), experts=_experts().astype(np.float32))
    with pytest.raises(TraceError, match=r"field 'experts': must be an integer array, got float32"):
        load_trace(path)


def test_top_k_larger_than_experts(tmp_path):
    path = write_raw(tmp_path / "t.npz", meta(top_k=9), experts=_experts())
    with pytest.raises(TraceError, match=r"field 'meta\.top_k': top_k 9 exceeds n_experts 8"):
        load_trace(path)


def test_weights_with_nan(tmp_path):
    w = np.full((4, 3, 2), 0.5, np.float32)
    w[1, 1, 1] = np.nan
    path = write_raw(tmp_path / "t.npz", meta(), experts=_experts(), weights=w)
    with pytest.raises(TraceError, match=r"field 'weights': contains NaN"):
        load_trace(path)


def _sd_arrays(gamma=2, steps=3, accepted=(0, 1, 2), n_verified=(3, 3, 3)):
    rng = np.random.default_rng(1)
    ex = np.argsort(rng.random((steps, gamma + 1, 3, 8)), axis=-1)[..., :2].astype(np.int16)
    return {"sd_gamma": np.array(gamma), "sd_experts": ex, "sd_accepted": np.array(accepted, np.int16),
            "sd_n_verified": np.array(n_verified, np.int16)}


def test_incomplete_sd_record(tmp_path):
    sd = _sd_arrays()
    del sd["sd_accepted"]
    path = write_raw(tmp_path / "t.npz", meta(), experts=_experts(), **sd)
    with pytest.raises(TraceError, match=r"field 'sd_accepted': SD record is incomplete"):
        load_trace(path)


def test_sd_accepted_beyond_verified(tmp_path):
    path = write_raw(tmp_path / "t.npz", meta(), experts=_experts(), **_sd_arrays(accepted=(0, 3, 1)))
    with pytest.raises(TraceError, match=r"field 'sd\.accepted': values must lie in 0\.\.n_verified-1"):
        load_trace(path)


def test_sd_gamma_out_of_range(tmp_path):
    sd = _sd_arrays()
    sd["sd_gamma"] = np.array(0)
    path = write_raw(tmp_path / "t.npz", meta(), experts=_experts(), **sd)
    with pytest.raises(TraceError, match=r"field 'sd\.gamma': gamma 0 outside 1\.\.64"):
        load_trace(path)


def test_sd_experts_wrong_window(tmp_path):
    sd = _sd_arrays()
    sd["sd_gamma"] = np.array(3)  # arrays hold gamma+1 = 3 positions, not 4
    path = write_raw(tmp_path / "t.npz", meta(), experts=_experts(), **sd)
    with pytest.raises(TraceError, match=r"field 'sd\.experts': shape \(3, 3, 3, 2\), expected \[S, 4, 3, 2\]"):
        load_trace(path)


def _full_trace() -> Trace:
    tr = small_trace(tokens=6)
    rng = np.random.default_rng(5)
    tr.weights = rng.random(tr.experts.shape).astype(np.float32)
    tr.next_pred = tr.experts.copy()
    tr.next_pred[:, -1] = -1
    tr.prefill = small_trace(seed=3, tokens=5).experts
    sd = _sd_arrays()
    tr.sd = SDRecord(2, sd["sd_experts"], sd["sd_accepted"], sd["sd_n_verified"])
    tr.meta["workload"] = "gsm8k"
    return tr


def test_round_trip_keeps_every_field(tmp_path):
    tr = _full_trace()
    got = load_trace(save_trace(tr, tmp_path / "sub" / "t.npz"))
    assert got.meta == tr.meta
    for name in ("experts", "weights", "next_pred", "prefill"):
        np.testing.assert_array_equal(getattr(got, name), getattr(tr, name))
    assert got.experts.dtype == np.int16 and got.weights.dtype == np.float32
    assert got.sd.gamma == 2
    np.testing.assert_array_equal(got.sd.experts, tr.sd.experts)
    np.testing.assert_array_equal(got.sd.accepted, tr.sd.accepted)
    assert got.path.endswith("t.npz")


def test_save_refuses_an_invalid_trace_and_keeps_the_old_file(tmp_path):
    path = save_trace(small_trace(), tmp_path / "t.npz")
    before = path.read_bytes()
    bad = small_trace(seed=1)
    bad.experts[0, 0] = [3, 3]
    with pytest.raises(TraceError, match="repeated expert id"):
        save_trace(bad, path)
    assert path.read_bytes() == before


def test_atomic_write_leaves_no_temp_file(tmp_path):
    save_trace(small_trace(), tmp_path / "t.npz")
    assert sorted(os.listdir(tmp_path)) == ["t.npz"]


def test_interrupted_write_keeps_the_old_file_and_removes_the_temp(tmp_path):
    path = tmp_path / "data.bin"
    atomic_write_bytes(path, lambda f: f.write(b"old contents"))

    def failing(f):
        f.write(b"half of the new")
        raise RuntimeError("disk pulled")

    with pytest.raises(RuntimeError, match="disk pulled"):
        atomic_write_bytes(path, failing)
    assert path.read_bytes() == b"old contents"
    assert os.listdir(tmp_path) == ["data.bin"]


def test_list_traces_of_a_folder_and_an_empty_folder(tmp_path):
    save_trace(small_trace(), tmp_path / "b.npz")
    save_trace(small_trace(seed=2), tmp_path / "a.npz")
    assert [p.name for p in list_traces(tmp_path)] == ["a.npz", "b.npz"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(TraceError, match=r"field '<folder>': holds no \.npz trace files"):
        list_traces(tmp_path / "empty")


def test_saved_metadata_is_plain_json(tmp_path):
    path = save_trace(small_trace(), tmp_path / "t.npz")
    with np.load(path) as z:
        assert json.loads(str(z["meta"]))["model"] == "tiny"
