"""Where the map step runs: a process pool on this machine, or Ray (this machine or a cluster).

Contract: every engine takes trace paths, runs :func:`tracekit.ranks.summary.summary_of` on each
(the map function: a path in, a summary's Parquet bytes out) and returns ``{path: bytes or None}``
— None for a trace whose process died (a native crash, the kernel's OOM killer) — telling a
:class:`tracekit.progress.Phase` of each one done. Engines only schedule: what a summary holds
is decided by the map function alone, so every engine gives the same bytes for the same file and
the report built from them is the same byte for byte.

- ``pool`` (:func:`run_pool`, the default): up to ``workers`` spawned processes of this machine
  (:func:`tracekit.parallel.spawn_pool`); a process that dies breaks the pool, and the files it
  left unfinished are then summarised one process each, so the file that kills its process is the
  only one named. One worker: this process, no pool. Workers start with
  :func:`tracekit.parallel.releasing_env`, so one trace's freed memory is not still held while
  the next is read.
- ``ray`` (:func:`run_ray`, the ``ray`` extra): one Ray task per trace, one CPU each, no retry (a
  file that kills its worker is named, not read again). Ray schedules them: a local instance
  started for the run (stopped after it) unless this process is already connected, or the cluster
  ``RAY_ADDRESS`` names. A local instance started here has the workers' CPUs asked for (else every
  core) and starts with :func:`~tracekit.parallel.releasing_env`, as the pool's workers do; an
  instance already running keeps the environment it was started with. An instance that does not
  start (a node that times out starting on a loaded machine) or a cluster that cannot be reached is
  one line (:class:`~tracekit.errors.UsageError`). On a cluster, each trace's path must be readable at the same path on every
  node (a shared file system) and every node needs this tracekit installed; only the small
  summaries come back to this machine.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from tracekit import parallel, progress
from tracekit.about import install_hint
from tracekit.errors import UsageError
from tracekit.ranks.summary import summary_of

#: The engines ``--engine`` names, the default first.
ENGINES = ("pool", "ray")


def run_pool(paths: list[str], workers: int, bar: progress.Phase,
             summarise: Callable[[str], bytes] = summary_of) -> dict[str, bytes | None]:
    """``summarise`` of each path in up to ``workers`` processes (module docstring)."""
    from concurrent.futures import as_completed
    from concurrent.futures.process import BrokenProcessPool

    done: dict[str, bytes | None] = {}
    if workers <= 1:
        for p in paths:
            done[p] = summarise(p)
            bar.update(len(done), len(paths))
        return done
    with parallel.spawn_pool(workers, env=parallel.releasing_env()) as pool:
        futures = {pool.submit(summarise, p): p for p in paths}
        for future in as_completed(futures):
            try:
                done[futures[future]] = future.result()
            except BrokenProcessPool:
                pass
            bar.update(len(done), len(paths))
    for p in paths:
        if p in done:
            continue
        try:
            with parallel.spawn_pool(1, env=parallel.releasing_env()) as pool:
                done[p] = pool.submit(summarise, p).result()
        except BrokenProcessPool:
            done[p] = None
        bar.update(len(done), len(paths))
    return done


def ray_module():
    """The ``ray`` package.

    Raises
    ------
    tracekit.errors.UsageError
        When it is not installed (one line naming the extra that installs it).
    """
    try:
        import ray
    except ImportError:
        raise UsageError(f"--engine ray needs Ray, which is not installed: {install_hint('ray')}") from None
    return ray


def run_ray(paths: list[str], bar: progress.Phase, cpus: int | None = None) -> dict[str, bytes | None]:
    """:func:`summary_of` of each path as one Ray task (module docstring); a local instance started
    here gets ``cpus`` CPUs (None: Ray's default, every core)."""
    ray = ray_module()
    started = not ray.is_initialized()
    if started:
        address = os.environ.get("RAY_ADDRESS") or None
        # Ray's own log lines would interleave with the report and the bar: warnings only.
        options = {"logging_level": logging.WARNING, "log_to_driver": False}
        try:
            if address:
                ray.init(address=address, **options)
            else:
                # The local instance's processes inherit this environment, its workers the allocator
                # setting of the pool's (a runtime_env would start workers of their own beside Ray's).
                with parallel.environment(parallel.releasing_env()):
                    ray.init(include_dashboard=False, num_cpus=cpus, **options)
        except Exception as err:  # noqa: BLE001 - Ray raises bare Exceptions (a node that timed out starting)
            where = f"the Ray cluster at {address}" if address else "a local Ray instance"
            reason = " ".join(str(err).split())[:200] or type(err).__name__
            raise UsageError(f"--engine ray: could not start or reach {where}: {reason}") from None
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(summary_of)
        pending = {task.remote(p): p for p in paths}
        waiting = list(pending)
        done: dict[str, bytes | None] = {}
        bar.update(0, len(paths))
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            for ref in ready:
                path = pending.pop(ref)
                try:
                    done[path] = ray.get(ref)
                except ray.exceptions.RayError:  # the worker died (the map function itself never raises)
                    done[path] = None
            bar.update(len(done), len(paths))
        return done
    finally:
        if started:
            ray.shutdown()
