"""Where a sweep's runs execute: in-process, on local processes (joblib/loky), or on a Ray cluster.

:func:`run_all` maps one picklable function over the runs and yields each result as it finishes
(any order; the caller appends rows as they come, so an interrupted sweep resumes). Ray is
imported only when asked for (extra ``cluster``): ``backend=ray`` starts a local Ray instance with
``n_jobs`` CPUs, or joins the cluster at ``address`` (``"auto"`` or ``"ray://host:10001"``; every
node must have this package installed). Each run is one Ray task of one CPU; a task that fails
raises here, naming the run.
"""
from __future__ import annotations

import os
from typing import Callable, Iterable, Iterator

BACKENDS = ("loky", "ray")
RAY_TIMEOUT_S = 3600.0   # a run that has not finished after this long fails the sweep


def check_backend(backend: str, address: str | None) -> None:
    """One-line errors for the ``backend`` and ``ray_address`` keys."""
    from sim.machine.specs import ConfigError

    if backend not in BACKENDS:
        raise ConfigError(f"backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    if address and backend != "ray":
        raise ConfigError(f"ray_address: {address!r} needs backend=ray (got backend={backend})")


def run_all(fn: Callable, items: list, n_jobs: int = 1, backend: str = "loky",
            address: str | None = None) -> Iterator:
    """``fn(item)`` for every item, yielded as each finishes."""
    check_backend(backend, address)
    if not items:
        return iter(())
    if backend == "ray":
        return _ray(fn, items, n_jobs, address)
    if n_jobs == 1 or len(items) <= 1:
        return map(fn, items)
    from joblib import Parallel, delayed

    return Parallel(n_jobs=n_jobs, return_as="generator_unordered")(delayed(fn)(r) for r in items)


def _ray(fn: Callable, items: list, n_jobs: int, address: str | None) -> Iterator:
    import ray

    started = not ray.is_initialized()
    if started:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:   # a local instance: workers see this source tree as the driver does
            env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
            ray.init(num_cpus=max(1, n_jobs), include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": env} if env else None)
    task = ray.remote(num_cpus=1, max_retries=0)(fn)
    return _ray_results(ray, {task.remote(item): item for item in items}, started)


def _ray_results(ray, pending: dict, shutdown: bool) -> Iterable:
    """Results as tasks finish; a Ray instance this sweep started is shut down at the end."""
    try:
        yield from _each_done(ray, pending)
    finally:
        if shutdown:
            ray.shutdown()


def _each_done(ray, pending: dict) -> Iterable:
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1, timeout=RAY_TIMEOUT_S)
        if not done:
            raise TimeoutError(f"no Ray task finished within {RAY_TIMEOUT_S:.0f} s; {len(pending)} runs left")
        ref = done[0]
        item = pending.pop(ref)
        try:
            yield ray.get(ref)
        except Exception as err:   # the task's own error, re-raised with the run that failed
            raise RuntimeError(f"run {item} failed on Ray: {err}") from err
