"""Result identity and resume (QA cases F7-F9, G6-G11): a changed input is never an old row, a
killed sweep resumes to the uninterrupted table, files follow the umask, one writer per folder."""
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from sim.run.identity import run_id, spec_label
from sim.run.resolve import resolve
from sim.run.spec import RunSpec

BASE = dict(policy="moespac", workload="gsm8k", gen_tokens=16)


@pytest.mark.parametrize("change", [dict(gen_tokens=24), dict(prompt_tokens=128), dict(context=2048),
                                    dict(acceptance=0.3), dict(seed=1), dict(cache_ratio=0.1), dict(gamma=4),
                                    dict(hardware={**__import__("sim.machine.specs", fromlist=["x"]).load_preset(
                                        "hardware", "rtx4090_pcie4"), "pcie_h2d_gbs": 50.0}),
                                    dict(policy_args={"K": 4})])
def test_every_input_changes_the_run_id(change):
    assert run_id(resolve(RunSpec.of(**BASE)).identity) != run_id(resolve(RunSpec.of(**{**BASE, **change})).identity)


def test_inputs_that_cannot_change_the_numbers_keep_the_run_id():
    ar = dict(BASE, policy="llamacpp")
    same = run_id(resolve(RunSpec.of(**ar)).identity)
    assert run_id(resolve(RunSpec.of(**ar, gamma=4, acceptance=0.3)).identity) == same   # AR: no gamma, no acceptance
    assert run_id(resolve(RunSpec.of(**BASE)).identity) == run_id(resolve(RunSpec.of(**BASE)).identity)
    ident = resolve(RunSpec.of(**BASE)).identity
    assert ident["hardware_spec"]["pcie_h2d_gbs"] == 25.0 and ident["model_spec"]["n_experts"] == 128


def test_a_changed_spec_is_named_after_its_change():
    preset = {"name": "rtx4090_pcie4", "pcie_h2d_gbs": 25.0, "vram_gib": 24.0}
    assert spec_label("rtx4090_pcie4", dict(preset, pcie_h2d_gbs=50), preset) == "rtx4090_pcie4[pcie_h2d_gbs=50]"
    assert spec_label("rtx4090_pcie4", dict(preset), preset) == "rtx4090_pcie4"


def sim(*args, **kw):
    return subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True, timeout=300, **kw)


SWEEP = ["sweep", "experiment.policies=[moespac,llamacpp]", "experiment.workloads=[gsm8k]", "n_jobs=1"]


def test_other_settings_are_refused_naming_the_keys_unless_appended(tmp_path):     # G6-G8
    assert sim(*SWEEP, "gen_tokens=16", f"out={tmp_path}").returncode == 0
    for change, named in (("gen_tokens=24", "gen_tokens (16 -> 24)"), ("acceptance=0.3", "acceptance (None -> 0.3)"),
                          ("hardware.pcie_h2d_gbs=50", "-> 50)")):
        p = sim(*SWEEP, "gen_tokens=16", change, f"out={tmp_path}")
        assert p.returncode == 2 and named in p.stderr and "append=true" in p.stderr, p.stderr
    assert "gen_tokens: 16" in (tmp_path / "config.yaml").read_text()        # not rewritten
    p = sim(*SWEEP, "gen_tokens=16", "hardware.pcie_h2d_gbs=50", "append=true", f"out={tmp_path}")
    assert p.returncode == 0, p.stderr
    df = pd.read_parquet(tmp_path / "results.parquet")
    assert sorted(df.hardware) == ["rtx4090_pcie4"] * 2 + ["rtx4090_pcie4[pcie_h2d_gbs=50]"] * 2
    assert df.run_id.nunique() == 4 and (tmp_path / "config.1.yaml").exists()


def test_a_rerun_replaces_its_row_and_a_second_writer_is_refused(tmp_path):          # F9, G11
    for _ in range(2):
        assert sim("run", "policy=llamacpp", "gen_tokens=16", f"out={tmp_path}").returncode == 0
    assert len(pd.read_parquet(tmp_path / "results.parquet")) == 1
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from traces.atomic import writer_lock\n"
                               "with writer_lock(sys.argv[1]):\n print('held', flush=True); time.sleep(60)",
                               str(tmp_path / "results.parquet")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        p = sim("run", "policy=llamacpp", "gen_tokens=16", f"out={tmp_path}")
        assert p.returncode == 2 and "being written by another process" in p.stderr
    finally:
        holder.kill()
        holder.wait()


def test_umask_0002_leaves_group_readable_files(tmp_path):                           # F7
    out = tmp_path / "d"
    p = subprocess.run(f"umask 0002; {sys.executable} -m sim run policy=llamacpp gen_tokens=16 timeline=true "
                       f"out={out}", shell=True, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    files = [f for f in out.rglob("*") if f.is_file()]
    assert {"results.parquet", "config.yaml", "timeline.json", "timeline.png"} <= {f.name for f in files}
    assert all(f.stat().st_mode & 0o777 == 0o664 for f in files), [(f.name, oct(f.stat().st_mode)) for f in files]


def _rows(path):
    try:
        return len(pd.read_parquet(path))
    except Exception:
        return 0


def _kill_after(args, path, rows, timeout=120):
    p = subprocess.Popen([sys.executable, "-m", "sim", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t = time.time()
    while _rows(path) < rows and p.poll() is None and time.time() - t < timeout:
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()


def test_sigkill_three_times_then_resume_equals_an_uninterrupted_gen_tokens_grid(tmp_path):   # G2-G5, G9
    args = [*SWEEP, "+experiment.grid={gen_tokens:[16,24,32]}"]
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    for rows in (1, 3, 4):
        _kill_after(args + [f"out={killed}"], killed / "results.parquet", rows)
    assert _rows(killed / "results.parquet") < 6
    assert sim(*args, f"out={killed}").returncode == 0
    assert sim(*args, f"out={whole}").returncode == 0
    a, b = (pd.read_parquet(d / "results.parquet").sort_values("run_id").reset_index(drop=True) for d in (killed, whole))
    assert len(a) == 6 and sorted(a.gen_tokens) == [16, 16, 24, 24, 32, 32]
    pd.testing.assert_frame_equal(a.drop(columns="sim_wall_s"), b.drop(columns="sim_wall_s"))
    assert not [f for f in killed.iterdir() if f.name.endswith(".tmp")]


ALT = {   # a valid non-default value of every run-specification field (and the base it needs)
    "hardware": "h200_pcie5", "runtime": "custom_cuda", "model": "deepseek_v2_lite", "quant": "q4_k_m",
    "quant_dense": "q8_0", "draft": "qwen3_0_6b", "gamma": 4, "acceptance": 0.3,
    "acceptance_model": {"decay": 0.9}, "policy": "moespac_ar", "policy_args": {"K": 4}, "overlap": False,
    "workload": "alpaca", "prompt_tokens": 128, "cache_ratio": 0.1, "slots_per_layer": 16,
    "vram_budget_gib": 23.0, "context": 2048, "equal_vram": True, "cache_type_k": "q8_0", "cache_type_v": "q8_0",
    "flash_attn": False, "swa_full": True, "unified_memory": True, "op_offload": False, "prefill": True, "ubatch": 256, "prefill_rule": "cpu",
    "prefill_threshold": 512, "batch": 2, "stagger": 1, "gen_tokens": 24, "seed": 1, "experiment": "x",
    "table_tokens": 300}
NEEDS = {"equal_vram": dict(policy="llamacpp"), "prefill_rule": dict(prefill=True),
         "prefill_threshold": dict(prefill=True), "stagger": dict(batch=2)}
SAME = {"timeline": True}            # changes what is written, not a number
ELSEWHERE = {"trace"}                # a replayed trace: its path and digest (test_trace_replay)


def test_every_field_of_the_run_specification_changes_the_run_id():
    """The identity is derived from the spec: a new field joins it with no other change (and this
    table lists a value for it, or says why not)."""
    from sim.run.spec import FLAT_KEYS

    assert set(FLAT_KEYS) == set(ALT) | set(SAME) | ELSEWHERE
    for key, value in ALT.items():
        base = {**BASE, **NEEDS.get(key, {})}
        before = run_id(resolve(RunSpec.of(**base)).identity)
        after = run_id(resolve(RunSpec.of(**{**base, key: value})).identity)
        assert before != after, f"{key}={value!r} leaves the run id unchanged"
    for key, value in SAME.items():
        assert run_id(resolve(RunSpec.of(**BASE)).identity) == run_id(resolve(RunSpec.of(**BASE, **{key: value})).identity)


def test_swa_full_from_the_command_line_sizes_gpt_oss_kv_cache(tmp_path):
    """llama.cpp's ``--swa-full`` keeps a full-context cache in gpt-oss's sliding-window layers: the
    KV term grows, and the key is type-checked from its spec field."""
    from sim.run.user_input import UserInputError, check_all

    args = dict(policy="llamacpp", model="gpt_oss_20b", hardware="rtx4090_pcie4", gen_tokens=8, context=32768)
    kv = [resolve(RunSpec.of(**args, swa_full=f)).plan.kv for f in (False, True)]
    assert 1.9 < kv[1] / kv[0] < 2.0      # half the layers slide (window 128): with --swa-full they hold 32k too
    with pytest.raises(UserInputError, match="swa_full='maybe': must be true or false"):
        check_all({"swa_full": "maybe"})


def test_the_identity_core_is_what_resolve_writes_first():
    """``IDENTITY_CORE`` (the columns analysis compares) and the keys ``identity_of`` always writes are
    one list: a key added to one and not the other fails here."""
    from sim.run.spec import IDENTITY_CORE

    assert tuple(resolve(RunSpec.of(**BASE)).identity)[:len(IDENTITY_CORE)] == IDENTITY_CORE
