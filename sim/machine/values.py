"""Checking one value against a rule: the type and range checks every command and spec builder shares.

:class:`Rule` says what a key accepts; :func:`check_value` applies it and returns the normalised value
or raises :class:`UserInputError` in one line naming the key, the value and the allowed range. The
table of every command-line key's rule is :data:`sim.run.user_input.RULES`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from sim.machine.presets import ConfigError


class UserInputError(ConfigError):
    """A value or key typed by the user that cannot be used (exit status 2)."""


@dataclass(frozen=True)
class Rule:
    """What a key accepts: ``kind`` int | number | bool | str | choice, bounds (inclusive unless open),
    ``nullable`` for keys where null means "the default", ``choices`` for kind choice (with ``low``:
    a choice or an integer >= low)."""

    kind: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    nullable: bool = False
    nonzero: bool = False
    choices: tuple = ()

    def describe(self) -> str:
        """The allowed values in words (for error messages)."""
        if self.kind == "bool":
            return "true or false"
        if self.kind == "choice":
            also = f" or an integer >= {_num(self.low)}" if self.low is not None else ""
            return "one of " + ", ".join(map(str, self.choices)) + also
        if self.kind == "str":
            return "a name or path"
        what = "an integer" if self.kind == "int" else "a number"
        if self.low is not None and self.high is not None:
            rng = f"{'(' if self.low_open else ''}{_num(self.low)}..{_num(self.high)}{']' if self.low_open else ''}"
            text = f"{what} in {rng}"
        elif self.low is not None:
            text = f"{what} {'>' if self.low_open else '>='} {_num(self.low)}"
        else:
            text = what
        if self.nonzero:
            text += " other than 0 (-1: all cores)"
        return text + (" or null" if self.nullable else "")


def _num(x: float) -> str:
    """A bound as written: integers in full (4194304, not 4.19e+06), other numbers short."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def check_value(key: str, value, rule: Rule):
    """``value`` of ``key`` checked against ``rule``, normalised (integral floats to int);
    :class:`UserInputError` naming the key, the value and the allowed values otherwise."""
    bad = UserInputError(f"{key}={show(value)}: must be {rule.describe()}")
    if value is None:
        if rule.nullable:
            return None
        raise bad
    if rule.kind == "bool":
        if not isinstance(value, bool):
            raise bad
        return value
    if rule.kind == "choice" and rule.low is not None and isinstance(value, (int, float)) \
            and not isinstance(value, bool):       # a name or a count (policy.gpu_layers: first | last | N)
        return check_value(key, value, Rule("int", rule.low))
    if rule.kind in ("str", "choice"):
        if not isinstance(value, str) or not value or (rule.choices and value not in rule.choices):
            raise bad
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise bad
    if rule.kind == "int":
        if float(value) != int(value):
            raise bad
        value = int(value)
    lo_ok = rule.low is None or (value > rule.low if rule.low_open else value >= rule.low)
    if not lo_ok or (rule.high is not None and value > rule.high) or (rule.nonzero and value == 0):
        raise bad
    return value


def show(value) -> str:
    """A value as an error message shows it."""
    return "null" if value is None else repr(value) if isinstance(value, str) else str(value)
