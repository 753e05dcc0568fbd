"""Policy presets: every ``conf/policy/<name>.yaml`` is a registered policy.

A preset names its class with ``_target_`` and sets its parameters; :func:`make_policy` builds a
fresh, independent object from it (no shared state between runs).
"""
from __future__ import annotations

import importlib
from functools import lru_cache

from omegaconf import OmegaConf

from sim.paths import CONF_DIR, preset_names


# Old names kept for experiments and result files that use them: the "oracles" are heuristics
# (Belady + next-use prefetch + per-layer split), not bounds; sim/bound computes the true bound.
ALIASES = {"oracle": "heuristic_oracle", "oracle_ar": "heuristic_oracle_ar"}


def policy_names() -> list[str]:
    """All registered policy names (aliases excluded: see :data:`ALIASES`)."""
    return preset_names("policy")


@lru_cache(maxsize=None)
def policy_preset(name: str) -> dict:
    """The preset's YAML as a dict (``_target_`` plus parameters)."""
    path = CONF_DIR / "policy" / f"{ALIASES.get(name, name)}.yaml"
    if not path.exists():
        raise KeyError(f"unknown policy {name!r}; valid: {', '.join(policy_names())}")
    return OmegaConf.to_container(OmegaConf.load(path), resolve=True) or {}


def preset_params(name: str) -> dict:
    """The preset's parameters: its YAML without ``_target_`` and ``description``."""
    return {k: v for k, v in policy_preset(name).items() if k not in ("_target_", "description")}


def policy_runtime(name: str) -> str:
    """The runtime profile (conf/runtime) the policy's system is built on; custom_cuda if unnamed."""
    return policy_preset(name).get("runtime") or "custom_cuda"


def make_policy(name: str, **overrides):
    """Instantiate the policy preset ``name``; ``overrides`` replace preset parameters."""
    params = dict(policy_preset(name))
    target = params.pop("_target_")
    params.pop("description", None)
    params.pop("runtime", None)
    overrides.pop("runtime", None)
    params.update(overrides)
    module, cls = target.rsplit(".", 1)
    policy = getattr(importlib.import_module(module), cls).from_params(**params)
    policy.name = name
    return policy
