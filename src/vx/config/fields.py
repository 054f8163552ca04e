"""Where a config value sits and how a refusal says so: the checks every config schema part shares.

`At` carries the file and the field path (`tasks.build.cache.inputs.files[2]`) to each check; the
kind checks (an object, a string, an array of strings, an integer in range) and `Level`, the keys
one object level accepts, refuse with a ConfigError naming the file, the field, what was wrong and
a hint — the nearest spelling, or vx's home for a key another tool spells differently.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, NoReturn

from msgspec import Struct, field

from vx.errors import ConfigError, did_you_mean

MAX_TIMEOUT_MS = 2**31 - 1


# ---------------------------------------------------------------- where a value sits


class At:
    """A spot in a config file: the file and the dotted field path to a value.

    The path is kept as a chain of steps and spelled only when a refusal needs it: one
    spot is made per key validated, thousands per workspace, and nearly all are never shown.
    """

    __slots__ = ("file", "_parent", "_step")

    def __init__(self, file: str, parent: At | None = None, step: str = ""):
        self.file = file
        self._parent = parent
        self._step = step

    @property
    def field(self) -> str:
        steps = []
        node: At | None = self
        while node is not None and node._step:
            steps.append(node._step)
            node = node._parent
        return "".join(reversed(steps)).removeprefix(".")

    def key(self, name: str) -> At:
        return At(self.file, self, "." + name)

    def item(self, index: int) -> At:
        return At(self.file, self, f"[{index}]")

    def refuse(self, message: str, hint: str | None = None) -> NoReturn:
        raise ConfigError(message, file=self.file, field=self.field, hint=hint)


def kind_of(value: Any) -> str:
    """JSON's name for a value's type, as a user would say it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def as_object(value: Any, at: At, what: str = "an object") -> dict[str, Any]:
    if not isinstance(value, dict):
        at.refuse(
            f"`{at.field or 'config'}` must be {what}, got {kind_of(value)}",
            hint="write a JSON object `{ ... }` here",
        )
    return value


def as_string(value: Any, at: At) -> str:
    if not isinstance(value, str):
        at.refuse(
            f"`{at.field}` must be a string, got {kind_of(value)}",
            hint="write the value in double quotes",
        )
    return value


def as_boolean(value: Any, at: At, hint: str = "write true or false") -> bool:
    if not isinstance(value, bool):
        at.refuse(f"`{at.field}` must be true or false, got {kind_of(value)}", hint=hint)
    return value


def as_strings(value: Any, at: At, noun: str = "strings") -> tuple[str, ...]:
    """An array of non-empty strings, each refusal pointing at its index."""
    if not isinstance(value, list):
        at.refuse(
            f"`{at.field}` must be an array of {noun}, got {kind_of(value)}",
            hint=f"write a JSON array, e.g. [{_example(value)}]",
        )
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            got = "an empty string" if item == "" else kind_of(item)
            at.item(i).refuse(
                f"`{at.field}` must hold non-empty {noun}, got {got}",
                hint="remove the entry, or write it as a non-empty string",
            )
    return tuple(value)


def _example(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else '"…"'


def as_integer(value: Any, at: At, low: int, high: int | None = None) -> int:
    """An int in [low, high]; JSON's `true` is not 1 and `1.0` is not an integer here."""
    if isinstance(value, bool) or not isinstance(value, int):
        at.refuse(
            f"`{at.field}` must be an integer, got {kind_of(value)}",
            hint=f"write a whole number without quotes, e.g. {max(low, 1) * 1000 if high else low}",
        )
    if value < low or (high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f">= {low}"
        at.refuse(f"`{at.field}` must be in {span}, got {value}", hint=_range_hint(low, high))
    return value


def _range_hint(low: int, high: int | None) -> str:
    if high == MAX_TIMEOUT_MS:
        return "timers above 2^31-1 ms (~24.8 days) do not mean 'no limit'; omit the field for none"
    return f"use a whole number of at least {low}, or omit the field"


# ---------------------------------------------------------------- object levels


class Level(Struct, frozen=True):
    """The keys one object level accepts, and what to say about ones it does not."""

    name: str
    allowed: frozenset[str]
    foreign: Mapping[str, str] = field(default_factory=dict)  # key -> where vx keeps it
    unsupported: Mapping[str, str] = field(default_factory=dict)  # key -> what to do now


def check_keys(obj: dict[str, Any], at: At, level: Level) -> None:
    """Refuse any key `level` does not know; `$schema` is welcome everywhere."""
    for key in obj:
        if key not in level.allowed and key != "$schema":
            _unknown_key(key, at.key(key), level)


def _unknown_key(key: str, at: At, level: Level) -> NoReturn:
    if key in level.unsupported:
        at.refuse(f"`{key}` is not supported yet in this version", hint=level.unsupported[key])
    allowed = ", ".join(sorted(level.allowed))
    message = f"unknown key `{key}` in {level.name} (allowed: {allowed})"
    if key in level.foreign:
        at.refuse(message, hint=level.foreign[key])
    near = did_you_mean(key, level.allowed)
    at.refuse(message, hint=f"did you mean `{near}`?" if near else None)


def turbo_home(key: str, home: str) -> str:
    return f"`{key}` is turbo's spelling; in vx it is {home}"


def nx_home(key: str, home: str) -> str:
    return f"`{key}` is nx's spelling; in vx it is {home}"


def wireit_home(key: str, home: str) -> str:
    return f"`{key}` is wireit's spelling; in vx it is {home}"
