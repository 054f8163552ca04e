"""Read JSON with comments (`//`, `/* */`) and trailing commas, strictly otherwise.

Comments and trailing commas are blanked to spaces (newlines kept) rather than removed,
so every offset json reports is an offset in the user's own text: the line and column
in an error point at what they wrote. The scan is two C-level regex passes, because a
per-character Python loop over a thousand configs would cost more than the run it plans.
"""

from __future__ import annotations

import json
import re
from typing import Any, NoReturn

from vx.errors import ConfigError

# A string is matched first so `//` and `/*` inside one are never read as comments.
_STRING = r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
_COMMENT = re.compile(_STRING + r"|//[^\n]*|/\*(?:.*?\*/|.*)", re.DOTALL)
_TRAILING_COMMA = re.compile(_STRING + r"|,(?=\s*[\]}])")


class _Problem(Exception):
    """What is wrong and where (an offset into the text), before it becomes a ConfigError."""

    def __init__(self, message: str, pos: int, hint: str | None = None):
        super().__init__(message)
        self.message, self.pos, self.hint = message, pos, hint


def loads(text: str, file: str) -> Any:
    """Decode JSONC `text`; any problem is a ConfigError naming `file`, line and column."""
    if text.startswith("\ufeff"):
        text = " " + text[1:]
    try:
        return _decode(text)  # most configs are plain JSON: skip the rewrite
    except json.JSONDecodeError:
        pass
    except _Problem as exc:
        raise _refusal(exc, file, text) from None
    plain = text  # offsets in the blanked text are offsets in the user's text
    try:
        plain = _TRAILING_COMMA.sub(_blank_comma, _COMMENT.sub(_blank_comment, text))
        return _decode(plain)
    except json.JSONDecodeError as exc:
        problem = _Problem(f"invalid JSON: {exc.msg}", exc.pos)
    except _Problem as exc:
        problem = exc
    raise _refusal(problem, file, plain) from None


MAX_DEPTH = 200  # arrays and objects inside one another: far past any real config


def _decode(text: str) -> Any:
    try:
        value = json.loads(text, object_pairs_hook=_unique_object, parse_constant=_no_constant)
        deep = _too_deep(value)
    except RecursionError:
        deep = True
    if deep:
        raise _Problem(
            f"nested more than {MAX_DEPTH} levels deep",
            0,
            hint="a config is a few levels of objects and arrays; check for a generated or broken file",
        )
    return value


def _too_deep(value: Any) -> bool:
    """Whether arrays/objects nest past MAX_DEPTH, walked without recursion (the checks after
    decoding recurse, and a RecursionError there would be a crash)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        if depth > MAX_DEPTH:
            return True
        stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return False


def _blank_comment(m: re.Match[str]) -> str:
    """Keep strings; turn a comment into spaces of its shape (newlines stay put)."""
    s = m.group()
    if s[0] == '"':
        return s
    if s.startswith("/*") and (len(s) < 4 or not s.endswith("*/")):
        raise _Problem("unterminated /* comment", m.start())
    return re.sub(r"[^\n]", " ", s)


def _blank_comma(m: re.Match[str]) -> str:
    """Blank a comma before `]`/`}` only when a value precedes it: `[,]` stays an error."""
    s = m.group()
    if s[0] == '"' or m.string[: m.start()].rstrip()[-1:] in ("[", "{", ","):
        return s
    return " "


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """Build an object, refusing a repeated key (json would keep the last, silently)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Problem(f"duplicate key `{key}`", -1, hint=_DUPLICATE_HINT)
            seen.add(key)
    return obj


_DUPLICATE_HINT = "a key may appear once per object; keep one of them"


def _no_constant(name: str) -> NoReturn:
    raise _Problem(
        f"`{name}` is not JSON data",
        -1,
        hint="config values must be plain JSON; write a number or a string",
    )


def _locate(problem: _Problem, text: str) -> int:
    """An offset for problems json found without one: the second spelling of the key."""
    if problem.pos >= 0:
        return problem.pos
    word = problem.message.split("`")[1]
    key = re.escape(json.dumps(word)) + r"\s*:" if problem.hint is _DUPLICATE_HINT else None
    spots = [m.start() for m in re.finditer(key or re.escape(word), text)]
    return spots[1] if key and len(spots) > 1 else (spots[0] if spots else 0)


def _refusal(problem: _Problem, file: str, text: str) -> ConfigError:
    pos = _locate(problem, text)
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return ConfigError(
        problem.message,
        file=file,
        field=f"line {line}, column {column}",
        hint=problem.hint or "vx config files are JSON; comments and trailing commas are allowed",
    )
