"""End-to-end runs on the real presets: sanity against public numbers, monotonicity, determinism."""
import dataclasses

import pytest

from sim.machine import specs as config
from sim.run.runner import run_one
from sim.run.spec import RunSpec

SHORT = dict(gen_tokens=64, workload="gsm8k")


def test_llamacpp_on_the_paper_machine_lands_near_the_published_rate():
    # llama.cpp, AR, f16: experts that do not fit stay in host RAM and run on the CPU.
    # The paper reports 15.23 tok/s on an RTX 4090 with Qwen3-30B-A3B. The calibrated llama_cpp
    # runtime (desktop CPU efficiency from a published llama.cpp measurement, not from this point)
    # predicts about 14.9 (docs/fidelity.md); this point is not in the training set.
    row = run_one(RunSpec.of(policy="llamacpp", cache_ratio=0.17, gen_tokens=256)).row
    assert 10.0 <= row["tps"] <= 25.0
    assert row["pcie_gb"] == 0.0 and row["gamma"] == 0


def test_same_config_same_row():
    a = run_one(RunSpec.of(policy="llamacpp_sd", **SHORT)).row
    b = run_one(RunSpec.of(policy="llamacpp_sd", **SHORT)).row
    a.pop("sim_wall_s"), b.pop("sim_wall_s")
    assert a == b or all((a[k] == b[k]) or (a[k] != a[k] and b[k] != b[k]) for k in a)


def _hw(**fields):
    return dataclasses.asdict(dataclasses.replace(config.hardware("rtx4090_pcie4"), **fields))


@pytest.mark.parametrize("seed", [0, 1])
def test_more_pcie_bandwidth_never_slows_ondemand_lru(seed):
    tps = [run_one(RunSpec.of(policy="ondemand_lru", hardware=_hw(pcie_h2d_gbs=bw), seed=seed, **SHORT)).row["tps"]
           for bw in (8, 16, 25, 50)]
    assert all(b >= a * (1 - 1e-12) for a, b in zip(tps, tps[1:])), tps


@pytest.mark.parametrize("seed", [0, 1])
def test_larger_cache_never_lowers_ondemand_lru_hit_rate(seed):
    hits = [run_one(RunSpec.of(policy="ondemand_lru", cache_ratio=r, seed=seed, **SHORT)).row["hit_rate"]
            for r in (0.02, 0.05, 0.1, 0.17, 0.2)]
    assert all(b >= a for a, b in zip(hits, hits[1:])), hits


def test_more_cpu_bandwidth_never_slows_llamacpp():
    tps = [run_one(RunSpec.of(policy="llamacpp", hardware=_hw(cpu_mem_bw_gbs=bw), **SHORT)).row["tps"]
           for bw in (40, 60, 89.6, 120)]
    assert all(b > a for a, b in zip(tps, tps[1:])), tps


def test_llamacpp_never_transfers_and_matches_its_static_split():
    row = run_one(RunSpec.of(policy="llamacpp", cache_ratio=0.17, **SHORT)).row
    assert row["n_transfers"] == 0
    slots = round(0.17 * 6144)
    assert row["hit_rate"] == pytest.approx(slots // 128 / 48, rel=1e-12)   # 8 whole layers of 48, every token


def test_trace_model_mismatch_is_a_clear_error(tmp_path):
    from traces.errors import TraceError
    from traces.synth import synthesize
    from traces.io import save_trace

    path = save_trace(synthesize("mixtral_8x7b", "gsm8k", 32, 0), tmp_path / "m.npz")
    with pytest.raises(TraceError, match="meta.n_layers.*qwen3_30b_a3b"):
        run_one(RunSpec.of(policy="llamacpp", trace=str(path), **SHORT))
