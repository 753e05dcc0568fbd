"""Which settings differ between the run that made a folder and the run about to write into it.

Every command that resumes into an ``out=`` folder (``sim run|sweep``, ``real.offload``, ``traces
capture``) refuses a folder made with other settings, naming the keys that differ; this is the one
comparison they share.
"""
from __future__ import annotations

ABSENT = "<absent>"


def differing_keys(old: dict, new: dict, skip=(), prefix: str = "") -> list[str]:
    """``"key (old -> new)"`` for every key whose value differs, nested mappings as ``a.b``; top-level
    keys in ``skip`` (paths, verbosity) are not compared. Sorted by key."""
    keys = []
    for k in sorted(set(old) | set(new), key=str):
        if not prefix and k in skip:
            continue
        a, b = old.get(k, ABSENT), new.get(k, ABSENT)
        if isinstance(a, dict) and isinstance(b, dict):
            keys += differing_keys(a, b, prefix=f"{prefix}{k}.")
        elif a != b:
            keys.append(f"{prefix}{k}" if isinstance(a, dict) or isinstance(b, dict) else f"{prefix}{k} ({a!r} -> {b!r})")
    return keys
