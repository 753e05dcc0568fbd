"""scripts/gpu_validate.sh, dry (``GPU_VALIDATE_DRY=1``): every step of the GPU validation runs on
the CPU at tiny shapes and writes its files, so the script cannot break unnoticed between GPU loans."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

from tests.real import need

ROOT = Path(__file__).resolve().parents[2]
POLICIES = {"moespac", "llamacpp_sd", "adaspec", "hybrimoe"}


def rows(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_dry_run_writes_every_table(tmp_path):
    need("torch")
    need("transformers")
    out = tmp_path / "gv"
    env = dict(os.environ, GPU_VALIDATE_DRY="1", BUDGET_S="600", PYTHON=sys.executable)
    p = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_validate.sh"), str(out)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    status = {r["step"]: r["status"] for r in rows(out / "status.csv")}
    assert status == dict.fromkeys(["machine", "links", "experts", "profile", "validate_r0.17", "validate_r0.5",
                                    "sync", "check"], "ok")
    links = rows(out / "links.csv")
    assert [int(r["bytes"]) for r in links] == [64 * 1024, 1 << 20]
    assert all(float(r["pinned_gbs"]) > 0 and float(r["pageable_gbs"]) > 0 for r in links)
    experts = rows(out / "experts.csv")
    assert {(r["shape"], r["tokens"]) for r in experts} == {(s, n) for s in ("qwen3_30b_a3b", "deepseek_v2_lite")
                                                          for n in ("1", "9")}
    tps = rows(out / "tps.csv")
    assert {(r["cache_ratio"], r["policy"]) for r in tps} == {(c, p) for c in ("0.17", "0.5") for p in POLICIES}
    for ratio in ("0.17", "0.5"):     # the speedup is the ratio of the two policies' tok/s, on each side
        by = {r["policy"]: r for r in tps if r["cache_ratio"] == ratio}
        sp, = [r for r in rows(out / "speedup.csv") if r["cache_ratio"] == ratio]
        for side in ("real", "sim"):
            want = float(by["moespac"][f"{side}_tps"]) / float(by["llamacpp_sd"][f"{side}_tps"])
            assert abs(float(sp[f"{side}_speedup"]) - want) <= 2e-3 * want + 1e-3
        assert (out / f"validate_r{ratio}" / "validation.csv").is_file()
    assert {r["policy"]: r["decision_counts"] for r in rows(out / "sync.csv")} == dict.fromkeys(POLICIES, "identical")
    assert (out / "check.txt").read_text().strip() == "identical to plain greedy"
    assert (out / "hardware.yaml").is_file() and "total" in (out / "summary.txt").read_text()
