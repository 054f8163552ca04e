"""Symlinks among the input candidates, followed for keys.

git lists a symlink as one entry (a 120000 blob holding the target's path), so without this a
task that declares `lib/**` where `lib -> ../../shared` keys the link and nothing reached through
it: an edit in `shared/` would be a cache hit. Here each link among the candidates is resolved:

- a link to a directory inside the workspace makes every candidate below the target also a
  candidate below the link (`lib/x.js` for `shared/x.js`), identified by the target's identity;
- a link to a file (anywhere) is identified by its own identity and the content it leads to;
- a link to a directory outside the workspace cannot be keyed from the listing: a task whose
  inputs reach it is refused (`outside`), naming the link;
- a link met below a linked directory's target is followed in turn, as turbo's walk follows it
  (keyed as the link alone, a file it leads to outside every glob would be a hit turbo misses);
- a link into its own ancestry (a cycle) is keyed as the link alone.

Stdlib only; nothing is resolved unless the listing holds a link.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable

from vx import witness


class Links:
    """The workspace's followed links, by workspace-relative link path."""

    def __init__(self) -> None:
        self.dirs: dict[str, str] = {}  # link -> workspace-relative target directory
        self.files: dict[str, str] = {}  # link -> the target file, workspace-relative or absolute
        self.outside: dict[str, str] = {}  # link -> absolute target directory outside the workspace

    def __bool__(self) -> bool:
        return bool(self.dirs or self.files or self.outside)


def find(root: Path, candidates: Iterable[str]) -> Links:
    """Resolve each candidate that is a symlink (each one is recorded for receipts)."""
    out = Links()
    top = str(root)
    for rel in candidates:
        path = os.path.join(top, rel)
        try:
            if not stat.S_ISLNK(os.lstat(path).st_mode):
                continue
            witness.read(path)  # its target is what it leads to: a receipt re-checks it
            real = os.path.realpath(path)
            st = os.stat(real)
        except OSError:
            continue  # dangling: keyed as the link alone
        witness.probed(real)
        inside = real == top or real.startswith(top + "/")
        target = real[len(top) + 1 :] if inside and real != top else ("" if inside else real)
        if stat.S_ISREG(st.st_mode):
            out.files[rel] = target if inside else real
        elif not stat.S_ISDIR(st.st_mode):
            continue
        elif not inside:
            out.outside[rel] = real
        elif target and not (rel == target or rel.startswith(target + "/")):
            out.dirs[rel] = target
    return out


def aliases(links: Links, paths: list[str], span) -> dict[str, str]:
    """Each candidate below an in-workspace directory link's target, seen through the link:
    alias path -> real path. `span(target)` gives the sorted slice of `paths` below it.

    A link among those candidates is followed through the alias too: an alias of a directory
    link joins `links.dirs` (so what it leads to is aliased, and re-walked after a run), an
    alias of a link out of the workspace joins `links.outside` (refused where a task reaches
    it). A chain stops at a directory it has passed through (the first link's own among them)
    or one holding it: keyed as the link alone, never an endless path."""
    out: dict[str, str] = {}
    todo: list[tuple[str, str, tuple[str, ...]]] = [
        (link, target, (link.rpartition("/")[0], target)) for link, target in links.dirs.items()
    ]
    while todo:
        link, target, chain = todo.pop()
        cut = len(target)
        for real in span(target):
            if real == target:
                continue
            alias = link + real[cut:]
            out[alias] = real
            inner = links.dirs.get(real)
            if inner is not None and not any(_holds(inner, t) for t in chain):
                links.dirs[alias] = inner
                todo.append((alias, inner, (*chain, inner)))
            elif real in links.outside:
                links.outside[alias] = links.outside[real]
    return out


def _holds(outer: str, inner: str) -> bool:
    """Whether the directory `outer` is `inner` or one of its ancestors."""
    return outer == inner or inner.startswith(outer + "/")


def refusal(link: str, shown: str, target: str, turbo: bool = False) -> tuple[str, str]:
    """The message and hint for inputs that reach `link` (`shown` as the task's globs see it), a
    link out of the workspace; `turbo`: the globs are a turbo.json task's `inputs`."""
    where = "the task's inputs in turbo.json" if turbo else "cache.inputs"
    return (
        f"input {link} is a symlink to {target}, a directory outside the workspace: vx keys "
        f"only what the workspace holds",
        f"move or copy it into the workspace (or make it a package and depend on it), or leave it "
        f"out of {where} with `!{shown}` and `!{shown}/**`",
    )
