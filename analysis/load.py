"""Reading result files and choosing the rows each table or figure uses.

Everything here works on the result-row result-row schema (``sim.run.results.REQUIRED`` plus the
optional columns the report uses when present).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.names import MOESPAC, canonical
from sim.run.identity import IDENTITY_COLUMNS
from sim.run.results import REQUIRED, read_results

SETTING = ("model", "hardware", "cache_ratio", "gen_tokens")   # shown in the note
HIDDEN_SETTING = ("model_spec", "hardware_spec", "gen_tokens_asked", "prompt_tokens", "context", "seed",
                  "code_version")                                # also part of a setting when present

MACHINE_FIELDS = ("name", "parts", "cpu_threads", "vram_gib")   # a machine, whatever runtime runs on it
MAIN_EXPERIMENTS = ("paper_qwen3",)
PAPER_GAMMA = 8


class AnalysisError(Exception):
    """A problem with the inputs of the analysis (missing files, columns or rows)."""


def load_results(path: str | Path) -> pd.DataFrame:
    """Every result row below ``path`` (a results.parquet or a folder), schema-checked."""
    path = Path(path)
    if not path.exists():
        raise AnalysisError(f"results path {path} does not exist (run e.g. "
                            "python -m sim sweep experiment=paper_qwen3 out=out/paper_qwen3)")
    try:
        df = read_results(path)
    except FileNotFoundError as exc:
        raise AnalysisError(str(exc)) from exc
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise AnalysisError(f"{path}: result rows lack required columns {missing}")
    if "source" not in df.columns:
        df["source"] = "sim"
    df["policy"] = df["policy"].map(canonical)   # old names of the heuristic oracles
    if "run_id" in df.columns:   # the same inputs twice (a copied folder): one row
        has = df["run_id"].notna()
        df = pd.concat([df[has].drop_duplicates("run_id", keep="last"), df[~has]], ignore_index=True)
    return df


@dataclass
class Slice:
    """Rows chosen for a table or figure, and a sentence saying how they were chosen."""

    rows: pd.DataFrame
    note: str


def _setting(df: pd.DataFrame) -> pd.Series:
    """One string per row naming its setting: the shown columns plus every hidden identity column
    present, the machine without its runtime (:func:`machine_of`)."""
    cols = list(SETTING) + [c for c in HIDDEN_SETTING if c in df.columns]
    shown = df[cols].map(str)
    if "hardware_spec" in shown.columns:
        shown["hardware_spec"] = shown["hardware_spec"].map(machine_of)
    return shown.agg(" | ".join, axis=1)


def machine_of(hardware_spec: str) -> str:
    """The machine of a row's ``hardware_spec`` without what its runtime adds: the composition's
    parts (datasheet presets; an overridden field shows in a part's label), the engine's CPU
    threads and the VRAM. Systems built on different runtimes (llama.cpp, kTransformers, HF) on one
    machine are one setting; a spec without parts (older rows) is compared whole."""
    try:
        spec = json.loads(hardware_spec)
    except (TypeError, ValueError):
        return str(hardware_spec)
    if not isinstance(spec, dict) or "parts" not in spec:
        return str(hardware_spec)
    return json.dumps({k: spec.get(k) for k in MACHINE_FIELDS}, sort_keys=True)


def _varying(rows: pd.DataFrame, cols) -> list[str]:
    return [c for c in cols if c in rows.columns and rows[c].map(str).nunique(dropna=False) > 1]


def _refuse_mixed(rows: pd.DataFrame) -> None:
    """No table may average rows of one (policy, workload) that differ in an identity field."""
    if "run_id" not in rows.columns:
        return
    for (policy, workload), g in rows.groupby(["policy", "workload"]):
        if g["run_id"].nunique() > 1:
            raise AnalysisError(f"rows of {policy} on {workload} differ in {_varying(g, IDENTITY_COLUMNS)}: "
                                "refusing to average them; put them in separate results folders or experiments")


def _at_gamma(rows: pd.DataFrame, gamma) -> tuple[pd.DataFrame, dict]:
    """The autoregressive rows, the speculative rows at ``gamma``, and the rows of each speculative
    policy never run at ``gamma`` (AdaSpec sets its own: its rows carry its largest draft length) at
    its most frequent gamma; returns them and {such policy: its gamma}."""
    sd = rows["gamma"] > 0
    keep = ~sd | (rows["gamma"] == gamma)
    done = set(rows.loc[keep & sd, "policy"])
    own = {}
    for policy, g in rows[sd & ~rows["policy"].isin(done)].groupby("policy")["gamma"]:
        own[policy] = int(g.mode()[0])
        keep |= (rows["policy"] == policy) & (rows["gamma"] == own[policy])
    return rows[keep], own


def main_slice(df: pd.DataFrame, experiment: str | None = None, model: str | None = None) -> Slice:
    """The rows of the main comparison table: one experiment, one setting, simulated runs.

    The experiment is ``experiment`` if given, else ``paper_qwen3`` if present, else the one with
    the most policies. Within it the most frequent (model, hardware, cache_ratio, gen_tokens)
    setting is kept, and the speculative rows at gamma 8 (or else the most frequent gamma); a
    speculative policy never run at that gamma (AdaSpec) keeps its own, and the note says so.
    """
    sim = df[df["source"] == "sim"]
    if model is not None:
        sim = sim[sim["model"] == model]
    if sim.empty:
        raise AnalysisError("no simulated rows" + (f" for model {model}" if model else ""))
    names = list(sim["experiment"].unique())
    if experiment is None:
        preferred = [e for e in MAIN_EXPERIMENTS if e in names]
        experiment = preferred[0] if preferred else max(
            names, key=lambda e: (sim.loc[sim.experiment == e, "policy"].nunique(), (sim.experiment == e).sum()))
    elif experiment not in names:
        raise AnalysisError(f"experiment {experiment!r} has no rows; present: {', '.join(map(str, names))}")
    rows = sim[sim["experiment"] == experiment]
    setting = _setting(rows)
    chosen = setting.value_counts().index[0]
    rows = rows[setting == chosen]
    sd = rows["gamma"] > 0
    gammas = rows.loc[sd, "gamma"]
    gamma = PAPER_GAMMA if (gammas == PAPER_GAMMA).any() else (int(gammas.mode()[0]) if len(gammas) else None)
    rows, own = _at_gamma(rows, gamma)
    _refuse_mixed(rows)
    shown = " | ".join(str(rows[c].iloc[0]) for c in SETTING)
    note = f"experiment {experiment}, setting (model | hardware | cache_ratio | gen_tokens) = {shown}"
    if gamma is not None:
        note += f", speculative policies at gamma={gamma}"
    if own:
        note += " (" + ", ".join(f"{p} at its own gamma={g}" for p, g in own.items()) + ": never run at that gamma)"
    if setting.nunique() > 1:
        others = sim[(sim["experiment"] == experiment)]
        note += (f" ({setting.nunique() - 1} other settings of this experiment left out; they differ in "
                 f"{', '.join(_varying(others, SETTING + HIDDEN_SETTING))})")
    return Slice(rows.copy(), note)


def experiment_rows(df: pd.DataFrame, experiment: str, axis: str, min_values: int = 3) -> Slice | None:
    """Simulated rows for a sweep figure over ``axis``: the named experiment's, else those of the
    first experiment where ``axis`` takes at least ``min_values`` values; None when there is none."""
    sim = df[df["source"] == "sim"]
    rows = sim[sim["experiment"] == experiment]
    if not rows.empty:
        return Slice(rows.copy(), f"experiment {experiment}")
    for name, group in sim.groupby("experiment", sort=True):
        values = group.loc[group["gamma"] > 0, axis] if axis == "gamma" else group[axis]
        if values.nunique() >= min_values:
            return Slice(group.copy(), f"experiment {name} (varies {axis})")
    return None


def has_hot_metrics(df: pd.DataFrame) -> bool:
    """True when MoE-SpAc rows carry the hot/cold precision columns."""
    if "hot_precision" not in df.columns:
        return False
    return df.loc[df["policy"] == MOESPAC, "hot_precision"].notna().any()
