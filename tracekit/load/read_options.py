"""How inputs may be read: the cap on the JSON a compressed input or a stream may give, and whether a
truncated or corrupt input is kept in part (``--partial``).

Contract: :class:`ReadOptions` holds both. :func:`options` returns the options in force: those
:func:`configure` set (through the environment, :data:`MAX_INFLATED_ENV` and :data:`PARTIAL_ENV`,
so that worker processes — diff's two profiles, ``report DIR``'s ranks — read inputs the same
way), else the defaults: no ``partial``, and a cap of a quarter of the memory this process can
still have (:func:`default_max_inflated`), so that a gzip bomb is one line, not an exhausted machine
or an allocator abort. :func:`parse_size` reads a size as ``--max-inflated-size`` takes it.
"""

from __future__ import annotations

import os
import re
import resource
from dataclasses import dataclass

MAX_INFLATED_ENV = "TRACEKIT_MAX_INFLATED_SIZE"
PARTIAL_ENV = "TRACEKIT_PARTIAL"
#: The smallest default cap, whatever the memory says (small traces always load).
MIN_DEFAULT_CAP = 64 << 20


@dataclass(frozen=True)
class ReadOptions:
    """``max_inflated_size``: most bytes of JSON a compressed input or a stream may give, and of data
    a Parquet file's frames or stored report may become once read (None: no cap); ``partial``: keep what a truncated or corrupt input gave instead of refusing it."""

    max_inflated_size: int | None
    partial: bool = False


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int | None:
    """``"8G"``, ``"500MiB"``, ``"1048576"`` -> bytes (binary units); ``"0"`` or ``"none"`` -> None
    (no cap). ValueError for anything else."""
    if text.strip().lower() in ("none", "unlimited"):
        return None
    m = _SIZE.match(text)
    if m is None:
        raise ValueError(f"not a size: {text!r} (e.g. 8G, 500M, 1048576)")
    value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    return value or None


def available_memory() -> int | None:
    """Bytes this process can still allocate: the least of the machine's available memory, the
    cgroup's remaining limit and the address-space limit less what is mapped (None: unknown)."""
    found: list[int] = []
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
                    break
    except (OSError, ValueError):
        try:
            found.append(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (OSError, ValueError, AttributeError):
            pass
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as fh:
            limit = fh.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as fh:
            used = int(fh.read().strip())
        if limit != "max":
            found.append(max(int(limit) - used, 0))
    except (OSError, ValueError):
        pass
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        found.append(max(soft - _mapped_bytes(), 0))
    return min(found) if found else None


def _mapped_bytes() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def default_max_inflated() -> int:
    """A quarter of :func:`available_memory` (the load holds the JSON and about twice as much in
    structs and frames), at least :data:`MIN_DEFAULT_CAP`; 16 GiB when memory is unknown."""
    available = available_memory()
    if available is None:
        return 16 << 30
    return max(available // 4, MIN_DEFAULT_CAP)


def configure(*, max_inflated_size: str | None = None, partial: bool = False) -> None:
    """Set the read options of this process and of the workers it starts (through the
    environment). ``max_inflated_size`` as :func:`parse_size` reads it; ValueError if malformed."""
    if max_inflated_size is not None:
        parse_size(max_inflated_size)
        os.environ[MAX_INFLATED_ENV] = max_inflated_size
    if partial:
        os.environ[PARTIAL_ENV] = "1"


def options() -> ReadOptions:
    """The read options in force: from :func:`configure` (the environment), else the defaults."""
    text = os.environ.get(MAX_INFLATED_ENV)
    try:
        cap = parse_size(text) if text else default_max_inflated()
    except ValueError:
        cap = default_max_inflated()
    return ReadOptions(max_inflated_size=cap, partial=os.environ.get(PARTIAL_ENV, "") not in ("", "0"))


def cap_hint() -> str:
    """Where the cap an input passed comes from, for the message that refuses it."""
    return "the limit --max-inflated-size sets; the default is a quarter of the free memory"


__all__ = ["MAX_INFLATED_ENV", "MIN_DEFAULT_CAP", "PARTIAL_ENV", "ReadOptions", "available_memory", "cap_hint",
           "configure", "default_max_inflated", "options", "parse_size"]
