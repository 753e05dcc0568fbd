"""Rerun the BAD and POOR cases of the reliability QA list against a checkout; write JSON.

    python scripts/qa_rerun.py run CODE_DIR QA_DIR OUT.json [ID ...]   # PYTHONPATH=CODE_DIR, cwd CODE_DIR
    python scripts/qa_rerun.py reprobe CODE_DIR QA_DIR OUT.json         # re-evaluate the probes only
    python scripts/qa_rerun.py table BEFORE.json AFTER.json            # the before/after markdown table

Each case records the exit status, the first error line, whether a Python traceback was printed,
and the output of its probe (rows, files, modes left behind). Cases are in ``scripts/qa_cases.py``.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from qa_cases import CASES, FUNCS, SETUP  # noqa: E402
from qa_cases_inputs import SETUP_INPUTS  # noqa: E402

SHARED = "/work/shared"


def _bash(cmd: str, code: Path, qa: Path, timeout: int = 400) -> tuple[int, str]:
    env = dict(os.environ, PYTHONPATH=str(code), QA=str(qa), SHARED=SHARED, PYTHONWARNINGS="ignore")
    try:
        p = subprocess.run(["bash", "-c", FUNCS + cmd], cwd=code, env=env, capture_output=True, text=True,
                           timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as exc:
        return 124, f"(timed out after {timeout} s) {exc.stdout or ''}"


def _first_line(out: str) -> str:
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    for l in lines:
        if re.match(r"(error|Error|usage|\w+Error:)", l):
            return l[:240]
    for l in reversed(lines):
        if re.match(r"\w+(Error|Exception):", l):
            return l[:240]
    return (lines[-1] if lines else "")[:240]


def run(code: str, qa: str, out: str, ids: list[str]) -> None:
    code, qa = Path(code).resolve(), Path(qa).resolve()
    qa.mkdir(parents=True, exist_ok=True)
    rc, text = _bash(SETUP, code, qa, timeout=900) if not (qa / "tr" / "good.npz").exists() else (0, "")
    if rc:
        sys.exit(f"set-up failed ({rc}):\n{text[-3000:]}")
    rc, text = _bash(SETUP_INPUTS, code, qa) if not (qa / "k" / "stamp").exists() else (0, "")
    if rc:
        sys.exit(f"set-up of the K cases failed ({rc}):\n{text[-3000:]}")
    results = json.loads(Path(out).read_text()) if ids and Path(out).exists() else {}
    for cid, verdict, cmd, probe in CASES:
        if ids and cid not in ids:
            continue
        t = time.perf_counter()
        rc, text = _bash(cmd, code, qa)
        res = {"verdict": verdict, "rc": rc, "first": _first_line(text), "traceback": "Traceback" in text,
               "wall_s": round(time.perf_counter() - t, 1), "tail": text[-1500:]}
        if probe:
            res["probe"] = _bash(probe, code, qa)[1].strip()[-600:]
        results[cid] = res
        print(f"{cid:4} rc={rc:<3} tb={int(res['traceback'])} {res['wall_s']:6.1f}s  {res['first'][:110]}"
              + (f"  | {res['probe'][:120]}" if probe else ""), flush=True)
        Path(out).write_text(json.dumps(results, indent=1))


def reprobe(code: str, qa: str, out: str) -> None:
    """Evaluate the probes again on what the cases left in ``qa`` (after changing a probe)."""
    code, qa = Path(code).resolve(), Path(qa).resolve()
    results = json.loads(Path(out).read_text())
    for cid, _, _, probe in CASES:
        if probe and cid in results:
            results[cid]["probe"] = _bash(probe, code, qa)[1].strip()[-600:]
    Path(out).write_text(json.dumps(results, indent=1))


def _cell(r: dict) -> str:
    text = f"{r['rc']}{' **traceback**' if r['traceback'] else ''}: {r['first'][:150]}"
    if r.get("probe"):
        text += f" · left: {r['probe'][:150]}"
    return " ".join(text.replace("|", "/").split())


def table(before: str, after: str) -> None:
    from qa_cases import FIXED  # the expected outcome of each case after the fix
    b, a = json.loads(Path(before).read_text()), json.loads(Path(after).read_text())
    print("| id | QA | before: exit, message / probe | after: exit, message / probe | fixed |")
    print("|---|---|---|---|---|")
    for cid, verdict, _, _ in CASES:
        if cid not in a:
            continue
        ok = (not a[cid]["traceback"]) and FIXED.get(cid, lambda r: True)(a[cid])
        print(f"| {cid} | {verdict} | {_cell(b[cid]) if cid in b else '-'} | {_cell(a[cid])} | {'yes' if ok else 'NO'} |")


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    elif sys.argv[1] == "reprobe":
        reprobe(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        table(sys.argv[2], sys.argv[3])
