"""Worker processes: the one core count and the one way a pool is made.

Contract: :func:`cores` is the number of cores this process may run on — every place that sizes
work by cores asks it, so loading, ``diff`` and ``report DIR`` agree. :func:`spawn_pool` is the
process pool every parallel step uses (the loader's shares, ``diff``'s two profiles, one process per
rank); it starts its workers with *spawn*, so a worker imports the caller's main module again, and
only a program written for that (an ``if __name__ == "__main__":`` guard, or the ``tracekit``
command) should make one; given ``env``, its workers start with those environment variables set
(:func:`releasing_env`: the allocator options of a worker that reads one large trace after
another); :func:`threads_unwaited` is a thread pool that, like
:func:`spawn_pool_unwaited`, does not hold its caller up at exit. :func:`shared_memory_dir` is
where files that processes hand each other go when memory has room for them (the loader's shares,
an inflated gzip trace).
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.context
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS says, else the count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


#: The allocator variable of Polars (jemalloc's options, read once when Polars is imported).
ALLOCATOR_VAR = "_RJEM_MALLOC_CONF"
#: What a worker reading one large trace after another (``report DIR``'s ranks) adds to it: freed
#: pages go back to the system at once. Polars' own setting keeps them for 0.5 s, then marks them
#: reclaimable for 1 s more (still counted as resident); the pages one trace freed are seldom taken
#: again by the next trace's threads (jemalloc gives threads arenas of their own), so a worker read
#: its next trace while still holding the last one's: on 100 MB ranks of the shipped GPT-2 step, a
#: worker peaked at 340 MB on its first rank and 430-457 MB on the next ones; given back at once,
#: 345-360 MB (bench/ranks.py).
RELEASE_AT_ONCE = "dirty_decay_ms:0,muzzy_decay_ms:0"


def releasing_env() -> dict[str, str]:
    """The environment to add for a worker that reads one large trace after another: this
    process's allocator options (:data:`ALLOCATOR_VAR`: Polars' defaults once it is imported, with
    any the user set) followed by :data:`RELEASE_AT_ONCE`, whose options win (jemalloc keeps the
    last of an option given twice, and Polars puts the variable it finds after its defaults)."""
    current = os.environ.get(ALLOCATOR_VAR)
    return {ALLOCATOR_VAR: f"{current},{RELEASE_AT_ONCE}" if current else RELEASE_AT_ONCE}


def spawn_pool(max_workers: int, env: Mapping[str, str] | None = None) -> ProcessPoolExecutor:
    """A pool of ``max_workers`` spawned processes (use it as a context manager); with ``env``,
    each starts with those environment variables set (this process's left as they were)."""
    # spawn, not fork: forking a process whose Polars thread pool is running can deadlock (the
    # child inherits locks held by threads that do not exist in it).
    context = multiprocessing.get_context("spawn")
    if env:
        context = multiprocessing.context.SpawnContext()
        context.Process = functools.partial(_ProcessWithEnv, env=dict(env))  # type: ignore[method-assign]
    return ProcessPoolExecutor(max_workers=max_workers, mp_context=context)


class _ProcessWithEnv(multiprocessing.context.SpawnProcess):
    """A spawned process started with ``env`` added to the environment it inherits. A spawned
    child's environment is this process's at the moment it starts (there is no argument for it), so
    :meth:`start` sets the variables for that moment and puts them back after."""

    def __init__(self, *args, env: Mapping[str, str], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._env = dict(env)

    def start(self) -> None:
        with environment(self._env):
            super().start()


@contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """This process's environment with ``env`` set for the block, put back after: for starting
    a process that inherits it (a spawned worker, a local Ray instance). Another thread reading the
    environment meanwhile sees the additions."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
