"""The shape and types of a points file (:mod:`sim.fidelity.points`), checked before any run.

Every refusal is one :class:`sim.machine.specs.ConfigError` line naming the file, the point (index and
id) and the field, with what it must be. A measured speed is a finite number > 0, never a boolean
(YAML's ``true`` is no 1.0) nor ``.inf``/``.nan``; run values are scalars, those with a rule in
:data:`sim.run.user_input.RULES` (``cache_ratio``, ``gamma``, ``policy.K``, ...) are range-checked by
it, and no number among them is infinite or NaN.
"""
from __future__ import annotations

from sim.machine.specs import ConfigError
from sim.run.user_input import Rule

POINT_KEYS = ("id", "measured_tok_s", "source", "grade", "run")
OPTIONAL = ("system", "group", "note", "url", "quote", "config", "assumed", "engine")   # provenance text
MEASURED_EXTRA = ("measured_prefill_tok_s",)   # other published numbers of the same run (not simulated)
RATIO_KEYS = ("id", "num", "den")


def check_file(raw, path) -> tuple[list, list]:
    """The ``points`` and ``ratios`` lists of a parsed points file, shape-checked."""
    if not isinstance(raw, dict):
        raise ConfigError(f"points={path}: must be a mapping with a 'points:' list (and optional 'ratios:'), "
                          f"got a {type(raw).__name__}")
    points, ratios = raw.get("points"), raw.get("ratios") or []
    for key, value in (("points", points), ("ratios", ratios)):
        if not isinstance(value, list):
            raise ConfigError(f"points={path}: '{key}' must be a list of mappings, got {_kind(value)}")
    return points, ratios


def check_point(p, i: int, path) -> str:
    """One point mapping checked; returns the ``where`` prefix naming it."""
    if not isinstance(p, dict):
        raise ConfigError(f"{path}: points[{i}]: must be a mapping of {', '.join(POINT_KEYS)}, got {p!r}")
    where = f"{path}: points[{i}] ({p.get('id', '?')})"
    for key in POINT_KEYS:
        if key not in p:
            raise ConfigError(f"{where}: missing key '{key}'")
    unknown = sorted(set(p) - set(POINT_KEYS) - set(OPTIONAL) - set(MEASURED_EXTRA))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: "
                          f"{', '.join(POINT_KEYS + OPTIONAL + MEASURED_EXTRA)}")
    if not isinstance(p["id"], (str, int)) or isinstance(p["id"], bool) or p["id"] == "":
        raise ConfigError(f"{where}: field 'id': must be a name, got {p['id']!r}")
    if not _valid(p["measured_tok_s"], Rule("number", 0, low_open=True)):
        raise ConfigError(f"{where}: measured_tok_s must be a number > 0 (finite, not true/false), "
                          f"got {p['measured_tok_s']!r}")
    for key in MEASURED_EXTRA:
        if key in p and p[key] is not None and not _valid(p[key], Rule("number", 0, low_open=True)):
            raise ConfigError(f"{where}: {key} must be a number > 0 (finite, not true/false), got {p[key]!r}")
    for key in ("source", "grade") + OPTIONAL:
        if key in p and not (isinstance(p[key], str) and (p[key] or key in OPTIONAL)):
            raise ConfigError(f"{where}: field '{key}': must be a non-empty string, got {p[key]!r}")
    if not isinstance(p["run"], dict):
        raise ConfigError(f"{where}: field 'run': must be a mapping of run keys, got {_kind(p['run'])}")
    for key, value in p["run"].items():
        check_run_value(str(key), value, where)
    return where


def check_run_value(key: str, value, where: str) -> None:
    """A run value: a scalar; finite if a number; in range if it has a rule."""
    from sim.run.user_input import RULES, UserInputError, check

    if isinstance(value, (dict, list)):
        raise ConfigError(f"{where}: field 'run.{key}': must be a single value, got {value!r}")
    if isinstance(value, float) and not _valid(value, Rule("number")):
        raise ConfigError(f"{where}: field 'run.{key}': must be a finite number, got {value!r}")
    if key in RULES:
        try:
            check(key, value)
        except UserInputError as exc:
            raise ConfigError(f"{where}: field 'run.{key}': {exc}") from None


def check_ratio(r, i: int, path) -> None:
    """One ratio claim mapping checked (its point ids are checked against the points later)."""
    if not isinstance(r, dict) or any(k not in r for k in RATIO_KEYS):
        raise ConfigError(f"{path}: ratios[{i}]: must be a mapping with keys {', '.join(RATIO_KEYS)} "
                          f"(and optional claim), got {r!r}")


def _valid(value, rule) -> bool:
    """Whether ``value`` passes ``rule`` (:func:`sim.run.user_input.check`: finite, no booleans)."""
    from sim.run.user_input import UserInputError, check

    try:
        check("value", value, rule)
        return True
    except UserInputError:
        return False


def _kind(value) -> str:
    return "nothing" if value is None else f"a {type(value).__name__} ({value!r})"
