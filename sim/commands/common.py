"""What the Hydra commands share: reading the composed config, checking it, the results folder.

Every input is checked before any work (:mod:`sim.run.user_input`); a spec changed on the command line
is named after its changes (``rtx4090_pcie4[pcie_h2d_gbs=50]``); a results folder whose
``config.yaml`` differs from this command's is refused, naming the differing keys, unless
``append=true``; one writer at a time holds a folder's results file (:func:`traces.atomic.writer_lock`).
"""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from sim.run.spec import FLAT_KEYS
from sim.run.user_input import (UserInputError, check_acceptance_model, check_all, check_policy_params, refuse_unknown,
                                threads_override)
from traces.atomic import atomic_write_bytes
from traces.settings_diff import differing_keys

FROM_GROUPS = ("policy", "policy_args", "overlap", "hardware", "runtime", "model", "draft", "workload")


def run_keys(command: str) -> tuple:
    """The run-specification keys (:data:`sim.run.spec.FLAT_KEYS`) that ``conf/<command>.yaml`` sets at
    its top level: a new field of the spec is a command-line key once the command's file names it."""
    from sim.paths import CONF_DIR

    own = set(OmegaConf.load(CONF_DIR / f"{command}.yaml")) - {"defaults"}
    return tuple(k for k in FLAT_KEYS if k in own and k not in FROM_GROUPS)


SPEC_GROUPS = ("hardware", "model", "draft")
EXPERIMENT_KEYS = ("name", "policies", "workloads", "grid", "description")
VOLATILE = ("out", "n_jobs", "resume", "append", "timeline", "format", "backend", "ray_address")   # do not change a run's numbers


def choice(group: str) -> str | None:
    """The preset name chosen for a config group (e.g. ``policy=moespac``)."""
    from hydra.core.hydra_config import HydraConfig

    try:
        return HydraConfig.get().runtime.choices.get(group)
    except ValueError:  # called outside Hydra (tests)
        return None


def given(key: str) -> bool:
    """True when the command line sets ``key`` or one of its fields."""
    from hydra.core.hydra_config import HydraConfig

    try:
        task = HydraConfig.get().overrides.task
    except ValueError:
        return True
    return any(o.lstrip("+~").split("=")[0].split(".")[0] == key for o in task)


def output_dir(cfg: DictConfig) -> Path:
    from hydra.core.hydra_config import HydraConfig

    try:
        return Path(HydraConfig.get().runtime.output_dir)
    except ValueError:  # called outside Hydra (tests)
        return Path(cfg.out)


def _valid_top(cfg: DictConfig, command: str) -> set:
    from sim.paths import CONF_DIR

    own = OmegaConf.load(CONF_DIR / f"{command}.yaml")
    return (set(own) - {"defaults"}) | {p.name for p in CONF_DIR.iterdir() if p.is_dir()} | {"hydra"}


def checked(cfg: DictConfig, command: str, keys) -> dict:
    """The command's top-level values, type- and range-checked; unknown top-level keys refused."""
    refuse_unknown(list(cfg), _valid_top(cfg, command), command)
    c = OmegaConf.to_container(cfg, resolve=True)
    out = check_all({k: c.get(k) for k in keys})
    if "acceptance_model" in out:
        out["acceptance_model"] = check_acceptance_model(out["acceptance_model"])
    return out


def specs_of(cfg: DictConfig) -> dict:
    """The machine (its gpu/host/link parts and field overrides), runtime, model and draft as dicts;
    a spec changed from its preset is named after the change."""
    from sim.machine.specs import load_preset
    from sim.run.identity import spec_label

    c = OmegaConf.to_container(cfg, resolve=True)
    out = {}
    for group in SPEC_GROUPS:
        spec = {k: v for k, v in c[group].items() if v is not None} if group == "hardware" else dict(c[group])
        preset = choice(group)
        if preset and "name" in spec:
            try:
                spec["name"] = spec_label(preset, spec, load_preset(group, preset))
            except (ValueError, OSError):
                pass
        out[group] = spec
    hw = out["hardware"]
    if "host" in c and "cpu" not in hw:
        hw.update(gpu=c["gpu"], host=c["host"], link=c["link"])   # a composition, not a flat machine
    if c.get("machine"):   # a calibrated machine (python -m sim calibrate bench=...) replaces the parts
        from sim.fidelity.machine_file import machine_hardware

        out["hardware"] = hw = machine_hardware(c["machine"])
    hw.update(threads_override(c))   # threads=N: the engine's CPU threads (llama.cpp -t N)
    out["runtime"] = c.get("runtime")
    return out


def _config_text(cfg: DictConfig) -> bytes:
    return OmegaConf.to_yaml(cfg, resolve=True).encode()


def prepare_folder(cfg: DictConfig, out: Path, append: bool, restart: str = "") -> None:
    """Refuse a results folder made with other settings (unless ``append``); write ``config.yaml``
    (the earlier one is kept as ``config.N.yaml`` when appending)."""
    from sim.run.results import RESULTS_FILE

    path, new = out / "config.yaml", OmegaConf.to_container(cfg, resolve=True)
    if path.exists() and (out / RESULTS_FILE).exists():
        old = OmegaConf.to_container(OmegaConf.load(path), resolve=False)   # data: never resolved
        diff = differing_keys(old, new, skip=VOLATILE)
        if diff and not append:
            shown = "; ".join(diff[:6]) + (f"; and {len(diff) - 6} more" if len(diff) > 6 else "")
            raise UserInputError(f"out={out}: holds results of other settings ({shown}); use another out={restart}, "
                                 "or append=true to add these runs to the folder")
        if diff:
            n = 1 + sum(1 for _ in out.glob("config.*.yaml"))
            path.replace(out / f"config.{n}.yaml")
    text = _config_text(cfg)
    atomic_write_bytes(path, lambda f: f.write(text))


def policy_params(cfg: DictConfig, name: str) -> dict:
    params = {k: v for k, v in OmegaConf.to_container(cfg.policy, resolve=True).items()
              if k not in ("_target_", "description")}
    return check_policy_params(name, params)


def trace_defaults(args: dict, specs: dict, cfg: DictConfig) -> None:
    """A replayed trace brings its model, workload, and (with a speculative-decoding record) its gamma
    and draft model, unless the command line names them; ``args["trace"]`` becomes the loaded trace
    (the run reads the file once)."""
    if not args.get("trace"):
        return
    from traces.io import load_trace

    trace = args["trace"] = load_trace(args["trace"])
    if not given("model"):
        specs["model"] = None
    if not given("workload"):
        args["workload"] = None
    if trace.sd is not None and not given("gamma"):
        args["gamma"] = int(trace.sd.gamma)
    if isinstance(trace.meta.get("draft_spec"), dict) and not given("draft"):
        specs["draft"] = dict(trace.meta["draft_spec"])
