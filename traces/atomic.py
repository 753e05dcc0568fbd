"""The project's one way to write a file: atomically, with the umask's mode, and one writer at a time.

:func:`atomic_write_bytes` writes to a hidden temporary file beside the target (named with the
writer's pid), gives it the mode an ordinary ``open()`` would (``0o666 & ~umask``; ``mkstemp``
alone gives 0600), and renames it over the target, so a reader never sees a partial file. A
SIGTERM (what SLURM sends on timeout) removes the temporary files still open before the process
ends; temporary files left by a SIGKILLed writer (its pid no longer alive) are removed by the next
write into the same folder. :func:`writer_lock` serialises read-modify-write cycles on one file
(``fcntl.flock``, released by the kernel when the holder dies), and :func:`check_writable` refuses an
output path that cannot be created before any work is done.
"""
from __future__ import annotations

import fcntl
import os
import re
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

_LIVE: set[str] = set()          # temporary files being written by this process
_TMP = re.compile(r"^\..+\.(\d+)\.[A-Za-z0-9_]{8}\.tmp$")
_LEGACY = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")   # older writers' names, without a pid
_LEGACY_AGE_S = 3600.0


class OutputPathError(ValueError):
    """An output path that cannot be written (the message names the key and the path)."""


class BusyError(ValueError):
    """Another process holds the writer lock of a file."""


def umask() -> int:
    """The process umask, read without changing it where Linux allows (``/proc/self/status``)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _on_sigterm(signum, frame):
    for tmp in list(_LIVE):
        try:
            os.unlink(tmp)
        except OSError:
            pass
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _install_sigterm() -> None:
    if threading.current_thread() is threading.main_thread() and \
            signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
        try:
            signal.signal(signal.SIGTERM, _on_sigterm)
        except ValueError:
            pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(folder: str | os.PathLike) -> list[Path]:
    """Remove temporary files left in ``folder`` by writers that are gone; returns what was removed."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    now = time.time()
    for e in entries:
        m = _TMP.match(e.name)
        stale = (m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1)))) or \
            (not m and _LEGACY.match(e.name) and now - e.stat().st_mtime > _LEGACY_AGE_S)
        if stale and e.path not in _LIVE:
            try:
                os.unlink(e.path)
                removed.append(Path(e.path))
            except OSError:
                pass
    return removed


def check_writable(path: str | os.PathLike, key: str = "out", kind: str = "file") -> Path:
    """Refuse an output ``path`` that cannot be created (a folder where a file is wanted, a file on the
    way, an unwritable place) with :class:`OutputPathError` naming ``key``; creates missing folders."""
    path = Path(path).expanduser()
    if kind == "file" and path.is_dir():
        raise OutputPathError(f"{key}={path}: is a folder; give a file name")
    if kind == "dir" and path.exists() and not path.is_dir():
        raise OutputPathError(f"{key}={path}: is a file; give a folder")
    folder = path.parent if kind == "file" else path
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputPathError(f"{key}={path}: cannot create the folder ({exc.strerror}: {exc.filename})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(f"{key}={path}: folder {folder} is not writable")
    return path


def atomic_write_bytes(path: str | os.PathLike, write) -> Path:
    """Call ``write(fileobj)`` on a temporary file beside ``path``, then rename it over ``path``.

    The file gets mode ``0o666 & ~umask``; the temporary file is removed on any error and on SIGTERM."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(path.parent)
    _install_sigterm()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
    _LIVE.add(tmp)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), 0o666 & ~umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    finally:
        _LIVE.discard(tmp)
    return path


@contextmanager
def writer_lock(path: str | os.PathLike, what: str = "results"):
    """Hold the exclusive writer lock of ``path`` (``.NAME.lock`` beside it) for the block; a second
    process asking for it meanwhile gets :class:`BusyError` at once (no waiting, no lost rows)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.parent / f".{path.name}.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise BusyError(f"{path}: the {what} file is being written by another process (pid {holder}); "
                            "wait for it to finish or use another out=") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield lock
    finally:
        os.close(fd)


def save_png(fig, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Write a matplotlib figure as a PNG the atomic way (folders created, the umask's mode), after
    ``tight_layout``, and close it: every figure of the project goes through here."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    atomic_write_bytes(path, lambda f: fig.savefig(f, format="png", dpi=dpi))
    plt.close(fig)
    return path
