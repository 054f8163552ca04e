"""npm-style semver ranges, just enough to tell whether a dependency links a workspace package.

Why our own: an entry is a workspace edge only if the package manager would link the member
(`^1` beside a local 2.0.0 is a registry dependency), and pulling a semver library onto
every run's start-up path for one predicate is not worth it.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator

_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?\Z")
_PARTIAL = re.compile(
    r"v?([xX*]|\d+)(?:\.([xX*]|\d+))?(?:\.([xX*]|\d+))?"
    r"(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?\Z"
)
_COMPARATOR = re.compile(r"(\^|~>?|>=|<=|>|<|=)?\s*([^\s^~<>=]+)")

Key = tuple  # (major, minor, patch, is_release, prerelease identifiers)


def satisfies(version: str, spec: str) -> bool:
    """npm-style range check: `||` alternatives of space-separated comparators.

    Understood: exact, `=`, `^`, `~`, `>`, `>=`, `<`, `<=`, x-ranges (`1.x`, `1`, `*`) and
    hyphen ranges. A prerelease version matches only a comparator set that names a
    prerelease of the same major.minor.patch, as npm does. Anything else (a dist-tag, a
    URL) is not a range, so it links nothing.
    """
    parsed = _VERSION.match(version.strip())
    if not parsed:
        return False
    key = _key(parsed.group(1, 2, 3), parsed.group(4))
    try:
        return any(_set_holds(key, part) for part in spec.split("||"))
    except ValueError:
        return False


def _key(numbers: Iterable[str], pre: str | None) -> Key:
    ids = (
        tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")) if pre else ()
    )
    return (*map(int, numbers), 0 if pre else 1, ids)


def _set_holds(key: Key, text: str) -> bool:
    bounds = list(_bounds(_hyphen(text.strip())))
    if key[3] == 0 and not any(b[1][:3] == key[:3] and b[1][3] == 0 and b[1][4] for b in bounds):
        return False
    return all(_compare(key, op, bound) for op, bound in bounds)


def _hyphen(text: str) -> str:
    low, sep, high = text.partition(" - ")
    return f">={low.strip()} <={high.strip()}" if sep else text


def _compare(key: Key, op: str, bound: Key) -> bool:
    return {
        ">=": key >= bound,
        ">": key > bound,
        "<": key < bound,
        "<=": key <= bound,
        "=": key == bound,
    }[op]


def _bounds(text: str) -> Iterator[tuple[str, Key]]:
    for op, version in _COMPARATOR.findall(text):
        found = _PARTIAL.match(version)
        if not found:
            raise ValueError(version)
        yield from _desugar(op or "=", found.group(1, 2, 3), found.group(4))


_FLOOR = (0, ())  # the lowest prerelease of a version: `<2.0.0-0`


def _desugar(op: str, parts: tuple[str | None, ...], pre: str | None) -> Iterator[tuple[str, Key]]:
    """Turn one comparator into plain `op key` bounds."""
    known = [int(p) for p in _known(parts)]
    if not known:
        if op in (">", "<"):
            yield "<", (0, 0, 0, *_FLOOR)  # nothing is above or below everything
        return  # `*`: anything
    if len(known) == 3:
        yield from _full(op, known, pre)
        return
    low = (*known, *[0] * (3 - len(known)), 1, ())
    bump = _bump(known, op)
    yield from _partial(op, low, bump)


def _known(parts: tuple[str | None, ...]) -> list[str]:
    out = []
    for p in parts:
        if p is None or p in "xX*":
            break
        out.append(p)
    return out


def _full(op: str, known: list[int], pre: str | None) -> Iterator[tuple[str, Key]]:
    exact = _key(map(str, known), pre)
    if op in ("^", "~", "~>"):
        yield ">=", exact
        top = _caret_top(known) if op == "^" else (known[0], known[1] + 1, 0)
        yield "<", (*top, *_FLOOR)
    else:
        yield op, exact


def _caret_top(known: list[int]) -> tuple[int, int, int]:
    major, minor, patch = known
    if major:
        return (major + 1, 0, 0)
    return (0, minor + 1, 0) if minor else (0, 0, patch + 1)


def _bump(known: list[int], op: str) -> tuple[int, int, int]:
    """The first version past a partial one (`1.2` → 1.3.0; `^0.2` → 0.3.0; `^0` → 1.0.0)."""
    if op == "^":
        first = next((i for i, n in enumerate(known) if n), len(known) - 1)
        idx = min(first, len(known) - 1)
    elif op in ("~", "~>"):
        idx = min(1, len(known) - 1)
    else:
        idx = len(known) - 1
    top = [*known[: idx + 1], *[0] * (3 - idx - 1)]
    top[idx] += 1
    return (top[0], top[1], top[2])


def _partial(op: str, low: Key, bump: tuple[int, int, int]) -> Iterator[tuple[str, Key]]:
    high = (*bump, *_FLOOR)
    if op in ("=", "^", "~", "~>"):
        yield ">=", low
        yield "<", high
    elif op == ">=":
        yield ">=", low
    elif op == ">":
        yield ">=", high
    elif op == "<":
        yield "<", (*low[:3], *_FLOOR)
    else:
        yield "<", high
