"""Table cells that are safe in a spreadsheet and lossless for any file name.

Every CSV the project writes (the dataset tables of ``python -m lpips_core score``, the pages'
downloads) goes through these rules; JSON and JSON Lines keep the raw text.

**Formulas.** A spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` (and a
tab or carriage return can hide one) as a formula: a file named ``=cmd|' -C calc'!A0`` would
become a command. :func:`neutralise` prefixes such a text cell with an apostrophe (the OWASP
rule for CSV injection), which spreadsheets read as "this is text". It also prefixes a cell
that already starts with an apostrophe, so :func:`restore` (drop one leading apostrophe) gives
back exactly the text that was written, and a table read back is the table written. Numbers
are not text cells: ``-0.5`` stays a number.

**File names.** On Linux a file name is bytes; the ones that are not UTF-8 reach Python as
``str`` with lone surrogates (``os.fsdecode``: byte ``0xff`` → ``"\\udcff"``), which cannot
be written as UTF-8. :func:`escape_name` writes them losslessly in plain text: a byte that is
not UTF-8 as ``\\xNN`` and a backslash as ``\\\\`` (any other lone surrogate as ``\\uXXXX``);
every other character is kept, so ordinary names read exactly as they are. The escaped form is
also how such a name is shown (:func:`display_name`); :func:`unescape_name` inverts it.

**Terminals.** A name printed to a terminal can hold a newline (and forge a row of a table) or an
escape sequence (``ESC]0;...``, which retitles or recolours the terminal). :func:`printable`
writes such characters escaped, as Python's ``repr`` does (``\\n``, ``\\x1b``, ``\\u2028``), on top
of :func:`escape_name`'s rules; every CLI text table and error line goes through it (``--json``
keeps the raw text: ``json.dumps`` escapes control characters itself).

**Numbers.** :func:`number` is the one way the project writes a number as text (the CLI's tables,
the pages' values and titles, the diagnoses): the same value shown in two places is written by
the same call and agrees to the last digit.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["FORMULA_STARTS", "display_name", "escape_name", "frame_to_csv", "neutralise", "number", "one_line", "printable",
           "restore",
           "unescape_name"]

FORMULA_STARTS: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r")
"""First characters that make a spreadsheet treat a cell as a formula (OWASP)."""

_ESCAPED = re.compile(r"[\\\ud800-\udfff]")
_UNESCAPE = re.compile(r"\\(\\|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4})")


def neutralise(text: str) -> str:
    """``text`` as a CSV cell: prefixed with ``'`` when it starts with one of
    :data:`FORMULA_STARTS` or with ``'`` itself; otherwise unchanged."""
    if text and (text.startswith(FORMULA_STARTS) or text[0] == "'"):
        return "'" + text
    return text


def restore(cell: str) -> str:
    """The text :func:`neutralise` was given (one leading ``'`` removed)."""
    return cell[1:] if cell.startswith("'") else cell


def _escape_one(match: re.Match) -> str:
    ch = match.group(0)
    if ch == "\\":
        return "\\\\"
    code = ord(ch)
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def escape_name(name: str) -> str:
    """A file name as plain, encodable text: non-UTF-8 bytes as ``\\xNN``, ``\\`` as ``\\\\``."""
    return _ESCAPED.sub(_escape_one, name)


def _unescape_one(match: re.Match) -> str:
    body = match.group(1)
    if body == "\\":
        return "\\"
    if body[0] == "x":
        return chr(0xDC00 + int(body[1:], 16))
    return chr(int(body[1:], 16))


def unescape_name(text: str) -> str:
    """The name :func:`escape_name` was given."""
    return _UNESCAPE.sub(_unescape_one, text) if "\\" in text else text


# C0 controls, DEL, C1 controls (NEL among them), LINE and PARAGRAPH SEPARATOR, a backslash, lone surrogates.
_UNPRINTABLE = re.compile(r"[\\\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
_SHORT = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _printable_one(match: re.Match) -> str:
    ch = match.group(0)
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if code < 0x80:
        return f"\\x{code:02x}"
    # C1 controls as \\u0080-\\u009f: \\x80-\\xff is how escape_name writes a byte that is not UTF-8
    return f"\\u{code:04x}" if code < 0x100 else _escape_one(match)


def printable(text: str, *, backslash: bool = True) -> str:
    """``text`` safe to print to a terminal, as one line that shows every character.

    Control characters are written escaped: ``\\n``, ``\\r`` and ``\\t`` by name, the other C0
    controls and DEL as ``\\xNN``, the C1 controls (U+0080-U+009F, NEL among them), LINE and
    PARAGRAPH SEPARATOR as ``\\uNNNN`` (``\\u0085``, ``\\u2028``). A backslash is written ``\\\\`` and
    a lone surrogate (a byte of a non-UTF-8 file name) as :func:`escape_name` writes it (``\\xff``),
    so the escaping is unambiguous. Every other character is kept: ordinary names, accents and
    emoji read as they are.

    ``backslash=False`` keeps backslashes as they are: for a message whose names are already quoted
    (``{path!r}`` or :func:`display_name`, which double them), such as a CLI's ``error: ...`` line.
    """
    text = str(text)
    if backslash:
        return _UNPRINTABLE.sub(_printable_one, text)
    return _UNPRINTABLE.sub(lambda m: m.group(0) if m.group(0) == "\\" else _printable_one(m), text)


def one_line(message: str) -> str:
    """An error message as one terminal line: runs of whitespace (newlines, tabs) become one space,
    as a wrapped exception text reads, and every other control character is shown escaped by
    :func:`printable` (``\\x1b``), backslashes kept (names in messages are quoted already)."""
    return printable(" ".join(str(message).split()), backslash=False)


def display_name(name: str) -> str:
    """How a file name is shown in messages and tables: :func:`escape_name`'s form."""
    return escape_name(name)


def _cell(value: Any) -> Any:
    return neutralise(escape_name(value)) if isinstance(value, str) else value


def frame_to_csv(frame) -> str:
    """A pandas ``DataFrame`` as CSV text (no index), every text cell (header included)
    escaped and neutralised; numbers, booleans and missing values as pandas writes them."""
    out = frame.copy()
    out.columns = [_cell(str(c)) for c in out.columns]
    for col in out.columns:
        if out[col].dtype == object or str(out[col].dtype) in ("string", "str"):
            out[col] = out[col].map(_cell)
    return out.to_csv(index=False)


def number(value: float | None, digits: int = 4, *, significant: bool = False, none: str = "—",
           short_exponent: bool = True) -> str:
    """``value`` as text: ``digits`` decimals (``"0.7614"``) or, with ``significant``, ``digits``
    significant digits, so a small non-zero value never reads as zero (``"0.00058"``, ``"5.8e-5"``;
    ``short_exponent=False`` keeps Python's ``"5.8e-05"``); ``"∞"``/``"−∞"`` for infinities and
    ``none`` for ``None`` or NaN.

    Raises:
        ValueError: ``digits`` below 0 (below 1 with ``significant``).

    Example:
        >>> number(1.19113), number(0.000581, 2, significant=True), number(None, none="n/a")
        ('1.1911', '0.00058', 'n/a')
    """
    if digits < (1 if significant else 0):
        raise ValueError(f"digits must be at least {1 if significant else 0}, got {digits!r}")
    if value is None or math.isnan(value):
        return none
    if math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if not significant:
        return f"{value:.{digits}f}"
    text = f"{value:.{digits}g}"
    mantissa, e, exponent = text.partition("e")
    return f"{mantissa}e{int(exponent)}" if e and short_exponent else text
