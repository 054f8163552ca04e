"""The projects a run reaches, so that a broken config outside them does not stop it.

A run's scope is the projects it selects (`--filter`, `-p`, the project it starts in, the
projects its `pkg#task` names) and, transitively, their package.json dependencies and the
projects their tasks' `dependsOn` name (`pkg#task`). That closure is known without the configs
outside it: the package graph comes from the manifests, and a project's `dependsOn` from its own
config, which is in the closure (and read) before anything it names is. A broken config of a
project in the scope is refused as it always was; one outside it is a warning, and the run
never reads a task of that project, so no key can fold what it would have said.

Everything is in scope — the first broken config is refused — for a run of every project (from
the root without a filter, `--all`), for `--affected` (what a broken config's project would
depend on is unknown, so whether a change reaches it is too) and where a plugin's `graph` hook
may add edges. The root project's config is in every scope: its tasks are the `//#…` every
project may name.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from vx.errors import ConfigError
from vx.model import ROOT_PROJECT, ProjectConfig, Workspace


def reached(
    ws: Workspace, configs: Mapping[str, ProjectConfig], seeds: Iterable[str]
) -> frozenset[str]:
    """`seeds` and every project they reach by package.json dependencies and `pkg#task`
    dependsOn entries (a name that is no package is the graph's to refuse)."""
    seen: set[str] = set()
    todo = list(seeds)
    while todo:
        name = todo.pop()
        if name in seen or name not in ws.packages:
            continue
        seen.add(name)
        todo.extend(ws.packages[name].deps)
        config = configs.get(name)
        for task in config.tasks.values() if config is not None else ():
            todo.extend(
                entry.rpartition("#")[0] or ROOT_PROJECT
                for entry in task.depends_on
                if "#" in entry and not entry.startswith("^")
            )
    return frozenset(seen)


def settle(broken: Mapping[str, ConfigError], scope: frozenset[str] | None) -> tuple[str, ...]:
    """Refuse the first broken config in `scope` (None: every project's), else the warning line
    for each one outside it, by file."""
    inside = sorted(n for n in broken if scope is None or n in scope or n == ROOT_PROJECT)
    if inside:
        raise broken[inside[0]]
    return tuple(
        warning(name, broken[name]) for name in sorted(broken, key=lambda n: broken[n].file)
    )


def warning(name: str, error: ConfigError) -> str:
    """One line: the file, what was wrong, and that it was not read."""
    what = error.message.splitlines()[0] if error.message else "refused"
    where = f", {error.field}" if error.field else ""
    return (
        f"{error.file} is broken ({what}{where}), outside this run's scope: not read; "
        f"a run that reaches {name} refuses it"
    )
