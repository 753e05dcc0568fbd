"""Which ``hydra...`` overrides the ``python -m sim`` commands accept (the rest are refused).

Hydra lets a command line add callbacks and other objects by ``_target_``
(``+hydra.callbacks.x._target_=shutil.copyfile`` copies a file anywhere), move the outputs or the
config search path. The commands need only what the README and docs/ document: a launcher for
parallel sweeps (``hydra/launcher=joblib``, ``submitit_slurm``, ``ray``, ...) and its fields
(``hydra.launcher.n_jobs=2``, ``hydra.launcher.partition=cpu``, ``hydra.launcher.ray.init.address=auto``),
plus ``hydra.verbose``. Flags (``-m``, ``--cfg job``) are not overrides and are not affected. No
override may name a ``_target_`` (or another ``_..._`` instantiation key), on any key: objects
are built from presets, never from the command line.
"""
from __future__ import annotations

ALLOWED_GROUPS = ("hydra/launcher",)
ALLOWED_PREFIXES = ("hydra.launcher.",)
ALLOWED_KEYS = ("hydra.verbose",)
ALLOWED_TEXT = "hydra/launcher=NAME, hydra.launcher.FIELD=VALUE, hydra.verbose"


def check_override(key: str) -> None:
    """Refuse override ``key`` (``key_or_group`` of a parsed override) if it sets an instantiation
    key (``_target_``, ``_args_``, ...) or is a ``hydra`` override other than the allowed ones."""
    from sim.run.user_input import UserInputError

    parts = key.replace("/", ".").split(".")
    special = next((p for p in parts if len(p) > 2 and p.startswith("_") and p.endswith("_")), None)
    if special:
        raise UserInputError(f"{key}: {special} cannot be set from the command line (objects are built "
                             "from presets)")
    if not (key == "hydra" or key.startswith(("hydra.", "hydra/"))):
        return
    if key in ALLOWED_GROUPS or key in ALLOWED_KEYS or key.startswith(ALLOWED_PREFIXES):
        return
    raise UserInputError(f"{key}: this Hydra override is not accepted; allowed: {ALLOWED_TEXT}")
