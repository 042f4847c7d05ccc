"""Java ``java.util.Properties`` text format, as Hudi writes ``hoodie.properties``.

Hudi stores table config with ``Properties.store``: ISO-8859-1 text, ``\\uXXXX`` escapes and
backslash-escaped separators. Readers written in Java unescape exactly this, so we must too.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> list[str]:
    """Joins continuation lines (an odd number of trailing backslashes) and drops comments."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 >= len(s):
            out.append(c)
            i += 1
            continue
        n = s[i + 1]
        if n == "u" and i + 6 <= len(s):
            out.append(chr(int(s[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(n, n))
        i += 2
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def loads(text: str) -> dict[str, str]:
    """Parses Java properties text into a dict (later duplicates win, as in Java)."""
    return dict(_split_key_value(line) for line in _logical_lines(text))


def _escape(s: str, is_key: bool) -> str:
    out: list[str] = []
    for i, c in enumerate(s):
        if c == "\\":
            out.append("\\\\")
        elif c in "=:#!":
            out.append("\\" + c)
        elif c == " " and (is_key or i == 0):
            out.append("\\ ")
        elif c == "\t":
            out.append("\\t")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\f":
            out.append("\\f")
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return "".join(out)


def dumps(props: Mapping[str, str], comment: str | None = None) -> str:
    """Serialises like ``Properties.store``: comment lines, a date line, then ``key=value`` lines."""
    now = _dt.datetime.now(_dt.timezone.utc)
    lines = []
    if comment:
        lines.append("#" + comment)
    lines.append("#" + now.strftime("%a %b %d %H:%M:%S UTC %Y"))
    lines.extend(f"{_escape(k, True)}={_escape(v, False)}" for k, v in props.items())
    return "\n".join(lines) + "\n"
