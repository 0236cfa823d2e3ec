"""Where inflated bytes go: this process's memory, or a file in shared memory that worker
processes map by its path.

Contract: :class:`InflatedOutput` collects the bytes an inflater gives (``out += piece``, ``len(out)``,
``del out[mark:]``) in memory; asked to (``spill_at``), once they pass that many bytes and
``/dev/shm`` has room for twice as much, it moves them to a file there and goes on writing to it;
a write that finds shared memory full brings them back into memory. :meth:`InflatedOutput.finish`
returns the bytes as one writable buffer (the file mapped copy-on-write) and the file's path, or
None for memory; :meth:`InflatedOutput.discard` removes the file after a failure. Whoever holds the
path afterwards removes it with :func:`remove_quietly`.
"""

from __future__ import annotations

import errno
import mmap
import os
import tempfile

from tracekit import parallel
from tracekit.load.layout import Buffer

#: An inflated input passing this many bytes moves to a file in shared memory (when asked for):
#: below it no worker process would decode a share of it anyway.
SPILL_MIN_BYTES = 64 << 20
#: What a file write fails with when the file system is full (or the file too big for it).
_NO_ROOM = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


class InflatedOutput:
    """Where inflated bytes go: this process's memory, moved to a file in shared memory once past
    ``spill_at`` bytes when that is not None (and ``/dev/shm`` has room for twice as much), then
    written there piece by piece. A write that finds shared memory full brings the bytes back into
    memory and goes on there. :meth:`finish` returns (the buffer, the file it maps or None)."""

    def __init__(self, spill_at: int | None) -> None:
        self.memory: bytearray | None = bytearray()
        self.spill_at = spill_at
        self.fd: int | None = None
        self.path: str | None = None
        self.size = 0

    def __len__(self) -> int:
        return self.size if self.memory is None else len(self.memory)

    def __iadd__(self, piece: bytes) -> InflatedOutput:
        if self.memory is not None:
            self.memory += piece
            if self.spill_at is not None and len(self.memory) >= self.spill_at:
                self._spill()
        elif not self._write(piece):
            self._back_to_memory()
            self.memory += piece  # type: ignore[operator]
        return self

    def __delitem__(self, key: slice) -> None:
        """``del out[mark:]``: cut back to ``mark`` bytes (the only deletion the inflater makes)."""
        if self.memory is not None:
            del self.memory[key]
        elif key.start < self.size:
            os.ftruncate(self.fd, key.start)  # type: ignore[arg-type]
            os.lseek(self.fd, key.start, os.SEEK_SET)  # type: ignore[arg-type]
            self.size = key.start

    def _spill(self) -> None:
        self.spill_at = None  # one try
        where = parallel.shared_memory_dir(2 * len(self.memory))  # type: ignore[arg-type]
        if where is None:
            return
        try:
            self.fd, self.path = tempfile.mkstemp(prefix="tracekit-inflated-", suffix=".json", dir=where)
        except OSError:
            return
        memory, self.memory = self.memory, None
        if not self._write(memory):  # type: ignore[arg-type]
            self.memory = memory
            self.discard()

    def _write(self, piece: bytes | bytearray) -> bool:
        """Append ``piece`` to the file; False when the file system has no room (the file then
        holds the bytes before it)."""
        with memoryview(piece) as view:
            done = 0
            try:
                while done < len(view):
                    done += os.write(self.fd, view[done:])  # type: ignore[arg-type]
            except OSError as err:
                if err.errno not in _NO_ROOM:
                    raise
                return False
        self.size += done
        return True

    def _back_to_memory(self) -> None:
        memory = bytearray(self.size)
        with open(self.path, "rb") as fh:  # type: ignore[arg-type]
            fh.readinto(memory)
        self.discard()
        self.memory = memory

    def finish(self) -> tuple[Buffer, str | None]:
        """The inflated bytes, and the shared-memory file they map (None: in memory)."""
        if self.memory is not None:
            return self.memory, None
        if self.size == 0:
            self.discard()
            return bytearray(), None
        try:
            data = mmap.mmap(self.fd, 0, access=mmap.ACCESS_COPY)  # type: ignore[arg-type]
        finally:
            os.close(self.fd)  # type: ignore[arg-type]
            self.fd = None
        return data, self.path

    def discard(self) -> None:
        """Close and remove the shared-memory file, if any."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.path is not None:
            remove_quietly(self.path)
            self.path = None


def remove_quietly(path: str) -> None:
    """Remove the file ``path``, if it is still there."""
    try:
        os.unlink(path)
    except OSError:
        pass


__all__ = ["SPILL_MIN_BYTES", "InflatedOutput", "remove_quietly"]
