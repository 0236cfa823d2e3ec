"""Worker processes: the one core count and the one way a pool is made.

Contract: :func:`cores` is the number of cores this process may run on — every place that sizes
work by cores asks it, so loading, ``diff`` and ``report DIR`` agree. :func:`spawn_pool` is the
process pool every parallel step uses (the loader's shares, ``diff``'s two profiles, one process per
rank); it starts its workers with *spawn*, so a worker imports the caller's main module again, and
only a program written for that (an ``if __name__ == "__main__":`` guard, or the ``tracekit``
command) should make one; :func:`threads_unwaited` is a thread pool that, like
:func:`spawn_pool_unwaited`, does not hold its caller up at exit. :func:`shared_memory_dir` is
where files that processes hand each other go when memory has room for them (the loader's shares,
an inflated gzip trace).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from contextlib import contextmanager
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS says, else the count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def spawn_pool(max_workers: int) -> ProcessPoolExecutor:
    """A pool of ``max_workers`` spawned processes (use it as a context manager)."""
    # spawn, not fork: forking a process whose Polars thread pool is running can deadlock (the
    # child inherits locks held by threads that do not exist in it).
    return ProcessPoolExecutor(max_workers=max_workers, mp_context=multiprocessing.get_context("spawn"))


@contextmanager
def spawn_pool_unwaited(max_workers: int) -> Iterator[ProcessPoolExecutor]:
    """:func:`spawn_pool` whose exit does not wait for its workers to end. Once the caller holds
    every result, a worker's own ending (freeing its memory: a fifth of a second after a 1 GB load's
    share) is off the caller's path; work still queued is cancelled, a worker still running ends
    after it (the interpreter waits for it at exit)."""
    pool = spawn_pool(max_workers)
    try:
        yield pool
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


@contextmanager
def threads_unwaited(max_workers: int) -> Iterator[ThreadPoolExecutor]:
    """A pool of ``max_workers`` threads of this process whose exit, like
    :func:`spawn_pool_unwaited`'s, does not wait for work still running (a thread waiting on a
    worker that an error made useless ends with that worker)."""
    pool = ThreadPoolExecutor(max_workers=max_workers)
    try:
        yield pool
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def shared_memory_dir(room: int) -> str | None:
    """``/dev/shm`` when it is a writable directory (memory, not disk) with at least ``room`` bytes
    free, else None (the default temp directory; containers often give ``/dev/shm`` only 64 MB)."""
    shm = "/dev/shm"
    try:
        if not (os.path.isdir(shm) and os.access(shm, os.W_OK)):
            return None
        stat = os.statvfs(shm)
    except OSError:
        return None
    return shm if stat.f_bavail * stat.f_frsize >= room else None
