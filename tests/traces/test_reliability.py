"""Bad inputs of the trace commands and the atomic writer (QA cases D3, D18, E6-E33, F7, F8)."""
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from tests.traces.helpers import small_trace
from traces import synth
from traces.atomic import BusyError, atomic_write_bytes, clean_stale, writer_lock
from traces.cli import main
from traces.errors import TraceError
from traces.importers import import_trace
from traces.io import load_trace, save_trace


def _rows(path, tokens=40, layers=32, **change):
    """A Mixtral-shaped routing JSONL (one problem): every (token, layer) row, then ``change``s by line."""
    lines = []
    for t in range(tokens):
        for l in range(layers):
            lines.append({"dataset": "gsm8k", "problem_id": 0, "layer": l, "token_idx": t, "experts": [0, 1],
                          "gating_probs": [0.6, 0.4]})
    for n, fields in change.items():
        lines[int(n[1:]) - 1].update(fields)
    path.write_text("\n".join(json.dumps(r) for r in lines) + "\n")
    return path


@pytest.mark.parametrize("change,named", [
    ({"l11": {"experts": [-3, 1]}}, "field 'line 11': negative expert id"),                     # E27
    ({"l5": {"gating_probs": [2.0, -1.0]}}, "field 'line 5': gating_probs [2.0, -1.0] must be 2 numbers in [0, 1]"),  # E28
    ({"l13": {"token_idx": 99999}}, "field 'line 13': token_idx 99999 of problem gsm8k/0 is far beyond"),  # E29
])
def test_implausible_routing_rows_are_refused_with_the_line(tmp_path, change, named):
    with pytest.raises(TraceError) as exc:
        import_trace(_rows(tmp_path / "x_routing.jsonl", **change))
    assert named in str(exc.value)
    assert import_trace(_rows(tmp_path / "ok_routing.jsonl"))[0].n_tokens == 40


def test_foreign_files_under_an_npz_name(tmp_path):                                         # D3, D18
    (tmp_path / "random.npz").write_bytes(np.random.default_rng(0).bytes(5000))
    with pytest.raises(TraceError, match="random or foreign bytes") as exc:
        load_trace(tmp_path / "random.npz")
    assert "allow_pickle" not in str(exc.value)
    np.save(tmp_path / "plain.npy", np.zeros((4, 3, 2), np.int16))
    os.replace(tmp_path / "plain.npy", tmp_path / "plain.npz")
    with pytest.raises(TraceError, match="single .npy array"):
        load_trace(tmp_path / "plain.npz")


@pytest.mark.parametrize("args,named", [
    (["stats", "trace=T", "slots=[0,-4,1000]"], "slots=-4: must be an integer >= 0"),            # E12
    (["stats", "trace=T", "slots=abc"], "slots='abc': must be a list of integers"),               # E13
    (["stats", "trace=T", "json=maybe"], "json='maybe': must be true or false"),                  # E15
    (["stats", "trace=T", "json=yes"], "json='yes': must be true or false"),                      # true/false only
    (["synth", "tokens=64", "out=DIR"], "give a trace file name ending in .npz"),                 # E6
    (["synth", "tokens=64", "out=FILE/sub.npz"], "cannot create the folder"),                     # E7
    (["synth", "tokens=0", "out=DIR/x.npz"], "tokens=0: must be an integer >= 1"),
    (["stats", "trace=T", "figure=FILE/x.png"], "figure="),                                       # E14 class
])
def test_command_arguments_are_checked_before_work(tmp_path, capsys, args, named):
    save_trace(small_trace(), tmp_path / "t.npz")
    (tmp_path / "afile").write_text("x")
    sub = {"T": str(tmp_path / "t.npz"), "DIR": str(tmp_path), "FILE": str(tmp_path / "afile")}
    args = [a.replace("=T", "=" + sub["T"]).replace("DIR", sub["DIR"]).replace("FILE", sub["FILE"]) for a in args]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err


def test_mixed_models_and_multi_request_file_out(tmp_path, capsys):                      # E10, E33
    save_trace(small_trace(), tmp_path / "s" / "a.npz")
    save_trace(small_trace(n_layers=4), tmp_path / "s" / "b.npz")
    assert main(["stats", f"trace={tmp_path / 's'}"]) == 2 and "statistics need one model" in capsys.readouterr().err
    src = _rows(tmp_path / "two_routing.jsonl")
    with open(src, "a") as f:
        for layer in range(32):
            f.write(json.dumps({"dataset": "gsm8k", "problem_id": 1, "layer": layer, "token_idx": 0,
                                "experts": [0, 1]}) + "\n")
    assert main(["import", f"source={src}", f"out={tmp_path / 'one.npz'}"]) == 2
    assert "holds 2 requests" in capsys.readouterr().err and not (tmp_path / "one.npz").exists()


def test_synth_refuses_more_tokens_than_memory_allows(monkeypatch):                       # E8
    monkeypatch.setattr(synth, "available_memory", lambda: 2**30)
    limit = synth.max_tokens("qwen3_30b_a3b")
    assert limit == int(0.5 * 2**30 // (synth.BYTES_PER_ROUTE * 48 * 8))
    with pytest.raises(TraceError, match=f"at most {limit} fit"):
        synth.synthesize("qwen3_30b_a3b", "gsm8k", limit + 1)


def test_atomic_write_follows_the_umask_and_cleans_stale_temporaries(tmp_path):          # F7, F8
    old = os.umask(0o002)
    try:
        atomic_write_bytes(tmp_path / "a.bin", lambda f: f.write(b"x"))
    finally:
        os.umask(old)
    assert (tmp_path / "a.bin").stat().st_mode & 0o777 == 0o664
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".a.bin.{dead.stdout.strip()}.abcdefgh.tmp"
    stale.write_bytes(b"partial")
    atomic_write_bytes(tmp_path / "b.bin", lambda f: f.write(b"y"))   # the next write into the folder cleans up
    assert not stale.exists() and clean_stale(tmp_path) == []


def test_sigterm_during_a_write_leaves_no_temporary_file(tmp_path):                      # F8
    code = ("import sys, time; from traces.atomic import atomic_write_bytes\n"
            "def slow(f):\n f.write(b'x'); print('writing', flush=True); time.sleep(30)\n"
            "atomic_write_bytes(sys.argv[1], slow)")
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "big.npz")], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "writing"
    assert [f.name for f in tmp_path.iterdir() if f.name.endswith(".tmp")]
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == -signal.SIGTERM
    assert list(tmp_path.iterdir()) == []


def test_writer_lock_refuses_a_second_holder(tmp_path):
    path = tmp_path / "results.parquet"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from traces.atomic import writer_lock\n"
                               "with writer_lock(sys.argv[1]):\n print('held', flush=True); time.sleep(30)", str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(BusyError, match=f"pid {holder.pid}"):
            with writer_lock(path):
                pass
    finally:
        holder.kill()
        holder.wait()
    with writer_lock(path):   # released when its holder dies
        pass
