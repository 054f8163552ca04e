"""Fold a HashRecord into a task key. Pure, and pinned by tests/golden.

Each step is `state = xxh3_64(label + part, seed=state) ^ state`: the seed is fed forward so
every bit of state carries, and each variable-length part is NUL-delimited or counted, so two
different records can never be spelled the same way.
"""

from __future__ import annotations

import fnmatch
from typing import Iterable, Sequence

import xxhash

from vx import CACHE_VERSION
from vx.model import HashRecord, TaskId

_MASK = (1 << 64) - 1


def _fold(state: int, label: str, part: str) -> int:
    data = f"{label}\0{len(part)}\0{part}".encode()
    return (xxhash.xxh3_64_intdigest(data, seed=state) ^ state) & _MASK


def task_key(record: HashRecord) -> str:
    """The 16-hex key of a task, folded in the fixed order of docs/caching.md."""
    state = _fold(0, "version", CACHE_VERSION)
    state = _fold(state, "task", record.task_id)
    state = _fold(state, "fingerprint", record.fingerprint)
    state = _fold(state, "package", record.package_json)
    state = _fold(state, "config", record.config)
    state = _fold(state, "args", "\0".join(record.forward_args) + f"\0{len(record.forward_args)}")
    state = _fold(state, "env", _env_text(record.env))
    state = _fold(state, "upstream", "".join(f"{tid}\0{key}\0" for tid, key in record.upstream))
    state = _fold(state, "files", "".join(f"{path}\0{ident}\0" for path, ident in record.files))
    if record.runtime:  # absent from records made before it, so their keys stand
        state = _fold(
            state,
            "runtime",
            "".join(f"{label}\0{len(value)}\0{value}\0" for label, value in record.runtime),
        )
    if record.plugin:  # as runtime: a workspace without plugins keys as before
        state = _fold(
            state,
            "plugin",
            "".join(f"{name}\0{len(value)}\0{value}\0" for name, value in record.plugin),
        )
    return f"{state:016x}"


def _env_text(env: Sequence[tuple[str, str | None]]) -> str:
    # Unset folds as the bare name, empty as `name=`: the two must never collide.
    parts = [name if value is None else f"{name}={value}" for name, value in env]
    return f"{len(parts)}\0" + "\0".join(parts)


def group_key(upstream: Iterable[tuple[str, str]]) -> str:
    """A group's key: an order-independent roll-up of its upstream `id:key` pairs."""
    state = _fold(0, "version", CACHE_VERSION)
    for tid, key in sorted(upstream):
        state = _fold(state, "member", f"{tid}:{key}")
    return f"{state:016x}"


# ---------------------------------------------------------------- inputs.tasks


def select_upstream(
    owner: TaskId, deps: Sequence[TaskId], patterns: Sequence[str] | None
) -> list[TaskId]:
    """The upstream tasks whose keys fold into `owner`'s key; the last matching pattern wins."""
    if patterns is None:  # the default `*` and `^*` together select every dependency
        return list(deps)
    pats = tuple(patterns)
    return [dep for dep in deps if _selected(owner, dep, pats)]


def _selected(owner: TaskId, dep: TaskId, patterns: Sequence[str]) -> bool:
    verdict = False
    for pat in patterns:
        negated = pat.startswith("!")
        body = pat[1:] if negated else pat
        if _task_pattern_matches(owner, dep, body):
            verdict = not negated
    return verdict


def _task_pattern_matches(owner: TaskId, dep: TaskId, pat: str) -> bool:
    same = dep.package == owner.package
    if "#" in pat:
        pkg, _, name = pat.rpartition("#")
        return fnmatch.fnmatchcase(dep.package, pkg or "//") and fnmatch.fnmatchcase(dep.task, name)
    if pat.startswith("^"):
        return not same and fnmatch.fnmatchcase(dep.task, pat[1:])
    return same and fnmatch.fnmatchcase(dep.task, pat)
