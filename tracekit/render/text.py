"""Display formatting shared by the views and the printers: durations, sizes, percentages, code spans, and the one
function every piece of user text (a name, a file name, a description) passes through before a
format escapes it for its own syntax: :func:`for_display`.

:func:`for_display` makes text *visible* and *safe to hand on*: control characters (C0, DEL, C1),
the Unicode bidi controls, line and paragraph separators, lone surrogates and the Unicode
noncharacters (U+FDD0–U+FDEF and the last two code points of every plane, U+FFFE, U+FFFF,
U+1FFFE … U+10FFFF) become backslash escapes (``\\x1b``, ``\\u202e``, ``\\ufffe``,
``\\U0010ffff``), so a name can neither drive a terminal nor reorder or hide what is shown around it;
and it cuts text longer than :data:`DISPLAY_LIMIT` characters with a marker saying how much was
cut. Its result holds only characters XML 1.0 allows (no C0 control, tab and newline included; no
surrogate; no U+FFFE/U+FFFF): the SVG pictures and the chart renderer's native code (vl-convert parses the text
it measures as XML and aborts the process on a character XML forbids) get no text they cannot
take. Display only: JSON keeps every name whole and exact. Kernel-name shortening and decoding live
with the taxonomy (:mod:`tracekit.classify.names`).
"""

from __future__ import annotations

import re


class Code(str):
    """A name (kernel, op, gate) shown as a code span in Markdown and plain elsewhere."""


#: A titled table of display cells: ``(title, headers, rows)``; a cell is a ``str`` or :class:`Code`
#: (the views' row builders return it; :class:`tracekit.render.document.Table` is the block it becomes).
Rows = tuple[str, list[str], list[list[str]]]

#: Longest text shown in one piece (a cell, a name, a line) in every text format and picture. Real
#: names stay whole up to it (CUTLASS and cuDNN kernel names of a few hundred characters); the few
#: longer ones (a FlashInfer template instance of 5,040 characters in a public vLLM trace) keep their
#: first thousand, which name the kernel; and a hostile name of 100,000 characters or more costs
#: every renderer (text measuring in the chart renderer, a browser laying out a page) no more than
#: a real one.
DISPLAY_LIMIT = 1000
#: The Unicode noncharacters: U+FDD0–U+FDEF and U+xFFFE, U+xFFFF in each of the 17 planes.
NONCHARACTERS = "\ufdd0-\ufdef" + "".join(f"{chr(p << 16 | 0xFFFE)}{chr(p << 16 | 0xFFFF)}" for p in range(17))
#: Characters never shown raw: C0 controls (newline too), DEL, C1 controls, the bidi marks,
#: embeddings, overrides and isolates, line/paragraph separators, lone surrogates (which no
#: UTF-8 writer can encode; they come from undecodable file names) and the noncharacters (no
#: text means them; U+FFFE and U+FFFF are not XML characters).
INVISIBLE = re.compile(f"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
                       f"{NONCHARACTERS}]")


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str) -> str:
    """``text`` with every :data:`INVISIBLE` character as a backslash escape (``\\x1b``, ``\\u202e``,
    ``\\U0010ffff``)."""
    return INVISIBLE.sub(_escape_char, text)


def for_display(value: object, limit: int = DISPLAY_LIMIT) -> str:
    """``value`` as text safe to show: :func:`visible`, and at most ``limit`` characters.

    Longer text keeps its first characters and ends with a marker (``… [+279,000 chars]``) that
    counts what was cut. Applying it twice changes nothing more.
    """
    s = "" if value is None else str(value)
    if len(s) <= limit:
        shown = visible(s)
        if len(shown) <= limit:
            return shown
    room, out, used, kept = limit - 24, [], 0, 0
    for ch in s[:limit]:
        piece = visible(ch)
        if used + len(piece) > room:
            break
        out.append(piece)
        used += len(piece)
        kept += 1
    return "".join(out) + f"… [+{len(s) - kept:,} chars]"


def us(ns: int | float | None) -> str:
    """Nanoseconds as microseconds with one decimal ("241.3 µs"); "–" for missing."""
    if ns is None:
        return "–"
    return f"{ns / 1000:,.1f} µs"


def pct(part: float, whole: float) -> str:
    """``part/whole`` as a percentage with one decimal; "–" when ``whole`` is 0."""
    return f"{100.0 * part / whole:.1f}%" if whole else "–"


def duration(ns: int | float | None) -> str:
    """A duration in the unit that reads best: ``812.4 µs``, ``92.2 ms``, ``3.21 s``; "–" for none."""
    if ns is None:
        return "–"
    if abs(ns) >= 1e9:
        return f"{ns / 1e9:,.2f} s"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:,.1f} ms"
    return us(ns)


def size(n: int | None) -> str:
    """Bytes in binary units: ``48.0 MiB``, ``5.67 GiB``; "–" for none."""
    if n is None:
        return "–"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n:,} B"


def counted(n: int, one: str, many: str | None = None) -> str:
    """``n`` and its noun: ``1 recompile``, ``3 recompiles``, ``2 GPU activities`` (``many`` when the
    plural is not ``one + "s"``)."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"
