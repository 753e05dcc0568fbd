"""What a run's code version adds when the checkout differs from its commit: a hash of the difference.

``<commit>+dirty`` alone names every uncommitted state alike, so a resumed sweep would reuse rows
computed by other uncommitted code. :func:`dirty_suffix` hashes the content of every file that
differs from the commit (modified, added, deleted, renamed, and untracked, e.g. a new policy module
or preset) under the folders a run's code and configuration come from (:data:`CODE_DIRS`): the
suffix is ``+dirty.<12 hex>``, the same for the same code in any process and any import order, and
empty when those folders equal the commit (changes to docs or tests do not change a run).

Hashing the files that differ, rather than the modules a process happens to have imported so far,
keeps a run's identity independent of the order in which a sweep imports its policies; it may count
a changed file that a run never imports (a new run then, never a stale one). One ``git status`` and
a read of the changed files, memoised per process by :func:`sim.run.identity.code_version`.
"""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

CODE_DIRS = ("sim", "traces", "real", "conf")


def changed_files(root: Path) -> list[str]:
    """Paths (relative to ``root``) under :data:`CODE_DIRS` that differ from HEAD, untracked included
    (ignored files, e.g. ``__pycache__``, are not); sorted."""
    out = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "-z", "--untracked-files=all",
                          "--", *CODE_DIRS], capture_output=True, text=True, timeout=30).stdout
    entries, paths = out.split("\0"), set()
    i = 0
    while i < len(entries):
        entry = entries[i]
        if len(entry) > 3:
            paths.add(entry[3:])
            if entry[0] in "RC":            # a rename or copy: the next entry is its source
                i += 1
                paths.add(entries[i]) if i < len(entries) and entries[i] else None
        i += 1
    return sorted(paths)


def dirty_suffix(root: Path) -> str:
    """``+dirty.<hash of the changed files' paths and contents>``, or ``""`` when nothing differs."""
    root = Path(root)
    files = changed_files(root)
    if not files:
        return ""
    h = hashlib.sha256()
    for rel in files:
        path = root / rel
        h.update(rel.encode() + b"\0")
        h.update(path.read_bytes() if path.is_file() else b"<absent>")
        h.update(b"\0")
    return "+dirty." + h.hexdigest()[:12]
