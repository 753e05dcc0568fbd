"""``python -m sim run trace=FILE`` reads the trace file once (resolved once, before the folder lock)."""
import sys

import pandas as pd

import sim.run.resolve
import traces.io
from traces.io import save_trace
from traces.synth import synthesize


def test_run_command_reads_its_trace_once(tmp_path, monkeypatch, capsys):
    from sim.__main__ import main

    path = save_trace(synthesize("mixtral_8x7b", "gsm8k", 12, 0), tmp_path / "t.npz")
    reads = []
    real = traces.io.load_trace

    def counted(p):
        reads.append(str(p))
        return real(p)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(traces.io, "load_trace", counted)
    monkeypatch.setattr(sim.run.resolve, "load_trace", counted)
    monkeypatch.setattr(sys, "argv", ["sim", "run", "policy=llamacpp", f"trace={path}", "gen_tokens=8",
                                      f"out={tmp_path / 'out'}"])
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    assert reads == [str(path)]
    row = pd.read_parquet(tmp_path / "out" / "results.parquet").iloc[0]
    assert row["trace"] == str(path) and row["model"] == "mixtral_8x7b" and row["gen_tokens"] == 8
