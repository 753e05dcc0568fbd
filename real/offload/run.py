"""``python -m real run``: offloaded speculative decoding of prompts with one policy.

Per prompt: a fresh policy and cache, the decode (:class:`real.offload.session.OffloadSession`),
one result row (``source=real``, the simulator's columns plus the measured policy overhead) and
the captured trace. ``check=true`` first decodes every prompt with the untouched model (plain
greedy, all weights on the device) and fails if any offloaded token differs.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sim.protocol.metrics import Counters


@dataclass
class RunReport:
    """What a run produced: rows, counters and traces per prompt, and the check's verdict."""

    rows: list = field(default_factory=list)
    counters: list = field(default_factory=list)
    traces: list = field(default_factory=list)
    tokens: list = field(default_factory=list)
    mismatches: list = field(default_factory=list)   # (prompt id, first differing position)
    out: Path | None = None


def load_hardware(name_or_path: str) -> dict:
    """A hardware spec as a dict: a ``conf/hardware`` preset name or a YAML file path."""

    from sim.machine import specs as config
    path = Path(name_or_path).expanduser()
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise config.ConfigError(f"hardware file {path} does not exist")
        from traces.datafile import DataFileError, load_data_yaml
        try:
            data = load_data_yaml(path, "hardware")   # a profile is data: no interpolation
        except DataFileError as exc:
            raise config.ConfigError(str(exc)) from None
    else:
        data = config.load_preset("hardware", name_or_path)
    config.hardware(data)   # validate now, with the file named
    return data


def prompt_list(opts, models) -> list[tuple[str, list[int]]]:
    """``(id, token ids)`` per prompt (``tiny:N`` random prompts, a JSONL file or a dataset)."""
    from real.capture import CaptureConfig, load_prompts
    cap = CaptureConfig(target="-", prompts=opts.prompts, out="-", prompt_len=opts.prompt_len,
                        limit=opts.limit, seed=opts.seed, split=opts.split, field=opts.prompt_field)
    return load_prompts(cap, models.vocab, models.encode or _no_text(opts))


def _no_text(opts):
    def encode(text):
        raise ValueError(f"prompts={opts.prompts!r} holds text, but this target has no tokenizer: use "
                         "prompts=tiny:N or pass tokenizer=PATH")
    return encode


def reference_tokens(models, prompts, opts) -> list[list[int]]:
    """Plain greedy decoding of every prompt by the untouched model (all weights on the device)."""
    from real.speculative import SpeculativeDecoder
    models.target.to(models.device)
    eos = models.eos if opts.eos else None
    return [SpeculativeDecoder(models.target, None, 0, eos).generate(ids, opts.max_new_tokens)[0]
            for _, ids in prompts]


RANGED = ("cache_ratio", "gamma", "max_new_tokens", "context", "seed", "prompt_len", "cpu_workers", "warmup",
          "fail_every", "delay_ms", "prefill", "prefill_rule", "prefill_threshold")
VOLATILE = ("out", "quiet")


def check_out(opts) -> None:
    """Refuse an ``out=`` folder that holds a run made with other options (its results and traces
    would be replaced or mixed); the same options rerun in place."""
    if not opts.out:
        return
    from traces.atomic import check_writable
    from traces.settings_diff import differing_keys
    out = check_writable(opts.out, "out", kind="dir")
    saved = out / "options.json"
    if saved.is_file():
        try:
            old = json.loads(saved.read_text())
        except (OSError, ValueError):
            old = {}
        new = json.loads(json.dumps(asdict(opts), sort_keys=True))
        diff = differing_keys(old, new, skip=VOLATILE)
        if diff:
            raise ValueError(f"out={out}: holds a run with other options ({'; '.join(diff[:5])}); use another "
                             "out= (one folder holds one run, so its rows and traces are never mixed)")
    elif (out / "results.parquet").exists() or (out / "traces").exists():
        raise ValueError(f"out={out}: holds results or traces of another run; use another out=")


@dataclass
class Prepared:
    """Models offloaded once, their prompts and (with ``check``) the reference tokens: several
    policies can run on one preparation (``validate`` does)."""

    models: object
    executor: object
    prompts: list
    reference: list | None

    def close(self) -> None:
        """Stop the executor's threads."""
        self.executor.close()


def prepare(opts) -> Prepared:
    """Check the options, load and offload the models, read the prompts (and decode the reference)."""
    from real.offload.copier import Faults
    from real.offload.models import load_models, offload
    from sim.policies import make_policy
    from sim.run.user_input import check_all, check_policy_params
    check_all(asdict(opts), RANGED)
    load_hardware(opts.hardware)
    check_policy_params(opts.policy, dict(opts.policy_args))
    policy = make_policy(opts.policy, **dict(opts.policy_args))   # a bad name or argument fails before loading
    if policy.deferred_experts:
        raise ValueError(f"policy.deferred_experts={policy.deferred_experts}: the real executor computes every expert "
                         "in its own layer (Expert Deferral changes the outputs, so it is simulated only); use 0")
    check_out(opts)
    models = load_models(opts)
    prompts = prompt_list(opts, models)
    reference = reference_tokens(models, prompts, opts) if opts.check else None
    return Prepared(models, offload(models, opts.cpu_workers, Faults(opts.fail_every, opts.delay_ms)),
                    prompts, reference)


def run(opts, prepared: Prepared | None = None) -> RunReport:
    """Run ``opts`` (:class:`real.offload.options.RunOptions`); prints a summary unless quiet.

    With ``prepared`` (from :func:`prepare`) the models are reused and stay open; otherwise they
    are loaded here and closed at the end.
    """
    from real.offload.session import OffloadSession
    own = prepared is None
    p = prepare(opts) if own else prepared
    session = OffloadSession(p.models, p.executor, opts, load_hardware(opts.hardware))
    report = RunReport(out=Path(opts.out) if opts.out else None)
    try:
        session.warm_up(p.prompts[0][1])
        for i, (pid, ids) in enumerate(p.prompts):
            row, counters, trace, tokens = session.run_prompt(pid, ids, i)
            report.rows.append(row)
            report.counters.append(counters)
            report.traces.append(trace)
            report.tokens.append(tokens)
            if p.reference is not None and tokens != p.reference[i]:
                report.mismatches.append((pid, _first_difference(tokens, p.reference[i])))
    finally:
        if own:
            p.close()
    if report.out is not None:
        write(report, opts)
    if not opts.quiet:
        print(summary(report, opts))
    return report


def _first_difference(a: list, b: list) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def write(report: RunReport, opts) -> None:
    """results.parquet, one trace per prompt under traces/, and the options as options.json."""
    from sim.run.results import RESULTS_FILE, append_rows
    from traces.io import atomic_write_bytes, save_trace
    out = report.out
    for row, trace in zip(report.rows, report.traces):
        path = out / "traces" / f"prompt_{trace.meta['prompt_index']:05d}.npz"
        save_trace(trace, path)
        row["trace"] = str(path)
    results = out / RESULTS_FILE
    if results.exists():
        results.unlink()
    append_rows(results, report.rows)
    text = json.dumps(asdict(opts), indent=2, sort_keys=True).encode()
    atomic_write_bytes(out / "options.json", lambda f: f.write(text))


def total(counters: list[Counters]) -> Counters:
    """The counters of several prompts added up (step times pooled)."""
    out = Counters()
    for c in counters:
        for name, value in vars(c).items():
            setattr(out, name, getattr(out, name) + value)
    return out


def summary(report: RunReport, opts) -> str:
    """A few lines: speed, cache behaviour, transfers, CPU share, policy overhead, check verdict."""
    c = total(report.counters)
    r, row0 = c.row(), report.rows[0]
    policy_ms = 1e3 * sum(t.meta["real"]["policy_s"] for t in report.traces) / max(1, c.steps)
    lines = [
        f"real run: policy {opts.policy} on {row0['model']} (draft {row0['draft']}), device {row0['device']}, "
        f"cache_ratio {opts.cache_ratio} -> {row0['n_slots']} slots, gamma {row0['gamma']}, "
        f"{'sync' if opts.sync else 'async'} prefetch, {len(report.rows)} prompt(s)",
        f"  {c.tokens} tokens in {c.decode_s:.3f} s of decode: {r['tps']:.2f} tok/s; {c.steps} steps, "
        f"step {r['step_ms_mean']:.2f} ms mean / {r['step_ms_p50']:.2f} p50 / {r['step_ms_p99']:.2f} p99",
        f"  hit rate {100 * r['hit_rate']:.1f}%, transfers {r['n_transfers']} (demand {c.demand_fetches}, "
        f"prefetch {c.prefetches}, stream {c.streams}), evictions {c.evictions}, "
        f"CPU share {100 * r['cpu_expert_share']:.1f}%",
        f"  policy hooks {policy_ms:.3f} ms per step ({100 * policy_ms / max(r['step_ms_mean'], 1e-12):.2f}% "
        f"of a step)",
    ]
    failed = sum(t.meta["real"]["failed_transfers"] for t in report.traces)
    if failed:
        lines.append(f"  {failed} transfer(s) failed (injected) and ran on the CPU")
    if opts.check:
        lines.append("  check: identical to plain greedy" if not report.mismatches else
                     f"  check: MISMATCH in {len(report.mismatches)} prompt(s): {report.mismatches}")
    if report.out is not None:
        lines.append(f"  wrote {report.out}/results.parquet and {len(report.traces)} trace(s)")
    return "\n".join(lines)
