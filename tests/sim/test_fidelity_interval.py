"""The 80% interval of a prediction, its LOSO coverage, the extrapolation line and the residual store,
on hand-made residuals (no simulation)."""
import json
import math

import numpy as np
import pytest

from sim.fidelity import validate as V
from sim.fidelity.coverage import held_out_coverage, point_coverage
from sim.fidelity.interval import AXIS_WIDEN, POOLED_WIDEN, band, held_out, interval_for, num, with_interval
from sim.fidelity.points import Point
from sim.fidelity.residual_store import build_records, load_store, write_store
from sim.fidelity.training_set import extrapolation_line, model_family, point_classes
from sim.fidelity.uncertainty import Uncertainty

CLS = {"gpu": "rtx4090", "host": "desktop_ddr5_2ch", "runtime": "rt", "family": "qwen3"}


def rec(source, r, runtime="rt", **classes):
    return {"id": f"{source}{r}", "source": source, **{**CLS, "runtime": runtime, **classes}, "held_out": r}


def test_band_is_the_10_and_90_percent_quantiles_widened_about_the_median():
    res = [-0.2, -0.1, 0.0, 0.1, 0.2, 0.3]              # linear interpolation: positions 0.5 and 4.5 of 0..5
    assert band(res) == pytest.approx((-0.15, 0.25))
    assert band(res, factor=2.0) == pytest.approx((0.05 - 0.4, 0.05 + 0.4))   # median 0.05
    assert band(res, level=1.0) == pytest.approx((-0.2, 0.3))


def test_interval_of_a_covered_runtime_uses_its_own_residuals():
    records = [rec("a", x) for x in (-0.2, -0.1, 0.0, 0.1, 0.2, 0.3)] + [rec("b", 2.0, runtime="other")]
    iv = interval_for(10.0, CLS, records)
    # runs high by up to 0.25 in log: the measured speed is below the prediction by up to exp(-0.25)
    assert (iv.low, iv.high) == pytest.approx((10 * math.exp(-0.25), 10 * math.exp(0.15)))
    assert iv.basis == "rt held-out n=6" and iv.n == 6
    assert with_interval(10.0, iv) == "10.0 tok/s (80%: 7.79-11.6)"


def test_a_runtime_without_enough_residuals_gets_the_pooled_ones_widened():
    records = [rec("a", x, runtime="other") for x in (-0.2, -0.1, 0.0, 0.1, 0.2, 0.3)] + [rec("b", 0.0)]
    res, own = held_out(records, "rt")
    assert not own and len(res) == 7
    lo, hi = band(res, factor=POOLED_WIDEN)
    iv = interval_for(5.0, CLS, records)
    assert (iv.low, iv.high) == pytest.approx((5 * math.exp(-hi), 5 * math.exp(-lo)))
    assert iv.basis == "pooled held-out n=7 x1.50"
    far = interval_for(5.0, {**CLS, "gpu": "rtx5070ti", "family": "glm4"}, records)   # two axes unseen
    lo2, hi2 = band(res, factor=POOLED_WIDEN * AXIS_WIDEN ** 2)
    assert (far.low, far.high) == pytest.approx((5 * math.exp(-hi2), 5 * math.exp(-lo2)))
    assert "no training point on gpu, family" in far.basis
    assert interval_for(float("nan"), CLS, records) is None and interval_for(5.0, CLS, records[:1]) is None


def test_loso_coverage_builds_each_interval_without_the_points_own_source():
    own = [rec("A", 0.0) for _ in range(6)]                                # would cover a residual of 0
    other = [rec("B", x) for x in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)]          # without A: q10 0.55, q90 0.95
    records = own + other
    (iv, flag), (iv_new, flag_new) = point_coverage([("A", CLS, 1.0, 1.0), ("C", CLS, 1.0, 1.0)], records)[0]
    assert (iv.low, iv.high) == pytest.approx((math.exp(-0.95), math.exp(-0.55))) and flag is False
    assert iv_new.n == 12 and flag_new is True                            # a new source: every record
    _, summary = point_coverage([("A", CLS, 1.0, 1.0), ("C", CLS, 1.0, 1.0)], records)
    assert summary == {"n": 2, "covered": 1, "share": 0.5}
    # a class seen only in the left-out source is an extrapolation for that source's point
    lone = records + [rec("A", 0.0, gpu="t4")]
    (iv_t4, _), = point_coverage([("A", {**CLS, "gpu": "t4"}, 1.0, 1.0)], lone)[0]
    assert "no training point on gpu" in iv_t4.basis


def test_held_out_coverage_checks_each_stored_residual_against_the_other_sources():
    records = [rec("A", 0.0)] + [rec("B", x) for x in (-0.1, 0.0, 0.1, 0.2, 0.3)] + [rec("C", 3.0)]
    # A: q10/q90 of B and C are -0.05 / 1.65: covered; C: A and B's 0.25 tops out below 3: not covered;
    # each B: only A and C are left (2 < MIN_OWN, pooled x1.5): 1.5 -+ 1.5 x 1.2 spans -0.3..3.3: covered
    assert held_out_coverage(records) == {"n": 7, "covered": 6, "share": 6 / 7}
    # without C, a B point has one residual left (A's): no interval, not counted
    assert held_out_coverage([r for r in records if r["source"] != "C"]) == {"n": 1, "covered": 1, "share": 1.0}


def test_model_family_and_the_extrapolation_line():
    assert [model_family(n) for n in ("qwen3_30b_a3b", "mixtral_8x7b", "deepseek_v2_lite", "gpt_oss_120b",
                                      "hf:Qwen3-30B-A3B", "hf:Mixtral-8x7B-Instruct-v0.1", "glm4_5_air")] == \
        ["qwen3", "mixtral", "deepseek", "gpt_oss", "qwen3", "mixtral", "glm4"]
    records = [rec("a", 0.1), rec("b", 0.2, runtime="custom_cuda", host="epyc_16c_ddr5")]
    line = extrapolation_line({"gpu": "rtx5070ti", "host": "epyc_ddr5_12ch", "runtime": "custom_cuda",
                               "family": "qwen3"}, records)
    assert line == ("extrapolating: no training point on gpu rtx5070ti, host epyc_ddr5_12ch; "
                    "runtime custom_cuda has 1 point")
    assert extrapolation_line(CLS, records) == "extrapolating: runtime rt has 1 point"
    assert extrapolation_line(CLS, records + [rec("c", 0.0), rec("d", 0.0)]) == ""      # FEW = 3 points
    assert point_classes({"gpu": "a6000", "host": "xeon5220r_ddr4_6ch", "model": "mixtral_8x7b"}, "hybrimoe") == \
        {"gpu": "a6000", "host": "xeon5220r_ddr4_6ch", "runtime": "hybrimoe", "family": "mixtral"}
    assert point_classes({"hardware": "rtx4090_pcie4"}, "llama_cpp")["host"] == "desktop_ddr5_2ch"


def _points():
    run = {"policy": "llamacpp", "gpu": "rtx4090", "host": "desktop_ddr5_2ch", "link": "pcie4_x16",
           "model": "qwen3_30b_a3b"}
    return [Point("A", 10.0, "s1", "A", run), Point("B", 20.0, "s2", "A", {**run, "gpu": "rtx5090"}),
            Point("C", 5.0, "s3", "A", run)]


def test_store_round_trip_and_the_printed_prediction(tmp_path):
    pts = _points()
    records = build_records(pts, {"A": 0.1}, {"llama_cpp"}, {"B": -0.2})
    assert [(r["how"], r["held_out"]) for r in records] == [("loso", 0.1), ("unfitted", -0.2), ("in_fit", None)]
    path = write_store(tmp_path / "res.yaml", "pts.yaml", records, 8)
    store = load_store(path)
    assert store.records == records and store.date
    unc = Uncertainty(path)
    classes = {**CLS, "runtime": "llama_cpp", "gpu": "h200"}
    lo, hi = band([0.1, -0.2], factor=POOLED_WIDEN * AXIS_WIDEN)
    assert unc.lines(12.0, classes) == [
        f"predicted: 12.0 tok/s (80%: {num(12 * math.exp(-hi))}-{num(12 * math.exp(-lo))})  "
        "[pooled held-out n=2 x1.88 (no training point on gpu)]",
        "extrapolating: no training point on gpu h200"]
    assert unc.band(12.0, classes) == f"{num(12 * math.exp(-hi))}-{num(12 * math.exp(-lo))}"
    assert Uncertainty(tmp_path / "none.yaml").band(12.0, classes) == "-"
    assert Uncertainty(tmp_path / "none.yaml").lines(12.0, classes)[0].startswith("predicted: 12.0 tok/s  (no interval:")


def test_validate_json_carries_the_interval_fields(tmp_path, monkeypatch, capsys):
    pts = _points()
    (tmp_path / "pts.yaml").write_text("points:\n" + "".join(
        f"  - {{id: {p.id}, measured_tok_s: {p.measured_tok_s}, source: {p.source}, grade: A, run: {json.dumps(p.run)}}}\n"
        for p in pts))
    store = write_store(tmp_path / "res.yaml", "pts.yaml", build_records(pts, {}, set(), {"A": 0.1, "B": -0.1, "C": 0.3}), 8)
    preds = [11.0, 18.0, float("nan")]
    fake = lambda points, *a, **k: [{"predicted_tok_s": x, "hardware": "hw", "model": "m", "runtime": "llama_cpp",
                                     "failure": "" if np.isfinite(x) else "does not fit"} for x in preds]
    monkeypatch.setattr(V, "predict_all", fake)
    V.validate(str(tmp_path / "pts.yaml"), None, True, 8, 1, False, str(store))
    res = json.loads(capsys.readouterr().out)
    a, b, c = res["points"]
    lo, hi = band([0.1, -0.1, 0.3], factor=POOLED_WIDEN)   # 3 residuals < MIN_OWN: pooled
    assert (a["interval_low_tok_s"], a["interval_high_tok_s"]) == pytest.approx((11 * math.exp(-hi), 11 * math.exp(-lo)))
    assert a["interval_basis"] == "pooled held-out n=3 x1.50" and a["predicted_tok_s"] == 11.0
    lo_a, hi_a = band([-0.1, 0.3], factor=POOLED_WIDEN)    # A's own source left out
    assert a["covered_loso"] is (11 * math.exp(-hi_a) <= 10.0 <= 11 * math.exp(-lo_a))
    assert b["extrapolating"] == ""                        # every class of B is in the store
    assert c["predicted_tok_s"] is None and c["failure"] == "does not fit" and c["interval_low_tok_s"] is None
    assert res["interval_coverage"]["predictions"]["n"] == 2 and res["interval_coverage"]["held_out"]["n"] == 3


def test_a_missing_or_malformed_store_is_one_error_naming_it(tmp_path):
    from sim.machine.specs import ConfigError
    from sim.fidelity.coverage import check_store

    with pytest.raises(ConfigError, match=r"residuals=.*none.yaml: no such file"):
        check_store(str(tmp_path / "none.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("records:\n  - {id: A, source: s}\n")
    with pytest.raises(ConfigError, match=r"residuals=.*bad.yaml: 'records' must be a list of mappings with keys"):
        load_store(bad)
