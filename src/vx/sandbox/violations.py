"""Judge a task's traced accesses against its grants: violations, notes, and failure hints.

Classification works from the grants and the host file system, not from what the sandbox
showed: inside the sandbox the workspace is an empty scratch, so a read that failed there is
only a violation when the file exists on the host, and a write that "succeeded" may have
landed in the scratch and vanished.

What counts (sandbox.md §4.10, with one deliberate widening noted in docs/sandbox.md):
- a write anywhere in the workspace outside the write grants (and the scratch globs);
- a read of an existing file in the task's own project, in another project (the root project's
  directories included), or under a withheld linked package, outside every grant.
Walls (.git, .vx, the cache dir), root-level files, and everything outside the workspace are the
sandbox working and are not counted; a write refused outside the workspace becomes a hint on
failure, and a credential store the task reached becomes a note.
"""

from __future__ import annotations

import os
from typing import Callable, Iterable

from msgspec import Struct, field

from vx.model import Grant, SandboxSpec, Violation
from vx.sandbox.grants import (
    CONFIG_FILES,
    CREDENTIAL_STORES,
    Layout,
    dependency_paths,
)
from vx.sandbox.trace import Access

_PSEUDO = ("/proc", "/dev", "/sys")
_REFUSED = ("EROFS", "EACCES", "EPERM")
_SHOWN_OUTSIDE = 5


class Report(Struct):
    """The verdict on one attempt: counted violations, and notes that explain but do not count."""

    violations: list[Violation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refused_outside: list[str] = field(default_factory=list)  # shown only when the task failed
    whole: bool = True  # False: the trace lacks the task's start or bwrap's exit (never a pass)

    def failure_hints(self, spec: SandboxSpec) -> list[str]:
        """The hint for writes refused outside the project, a few paths named (seed 0.0.217)."""
        if not self.refused_outside:
            return []
        paths = self.refused_outside
        shown = ", ".join(spec.rel(p) for p in paths[:_SHOWN_OUTSIDE])
        more = f" and {len(paths) - _SHOWN_OUTSIDE} more" if len(paths) > _SHOWN_OUTSIDE else ""
        grant = spec.grant_text(os.path.dirname(paths[0])) + "/"
        return [
            f"{spec.task}: the sandbox refused writes outside the project, which are not reported as "
            f"violations: {shown}{more}. If the task needs one, grant its directory, e.g. "
            f'`allow: {{ write: ["{grant}"] }}`'
        ]


class Judge:
    """Classify accesses for one task and one layout; `is_file` and `realpath` look at the host."""

    def __init__(
        self,
        spec: SandboxSpec,
        layout: Layout,
        tmpdir: str,
        is_file: Callable[[str], bool] = os.path.isfile,
        realpath: Callable[[str], str] = os.path.realpath,
    ) -> None:
        self.spec, self.layout, self.tmpdir, self.is_file, self.realpath = (
            spec,
            layout,
            tmpdir,
            is_file,
            realpath,
        )
        self.readable = (*spec.reads, *spec.writes)
        self.deps = dependency_paths(spec)
        self.stores = (
            tuple(f"{spec.home}/{rel}" for rel in CREDENTIAL_STORES)
            if spec.home not in ("", "/")
            else ()
        )

    def judge(self, accesses: Iterable[Access]) -> Report:
        report = Report()
        found: dict[tuple[str, str], Violation] = {}
        notes: dict[str, str] = {}
        refused: dict[str, None] = {}
        for access in accesses:
            self._one(access, found, notes, refused)
        written = {path for kind, path in found if kind == "write"}
        report.violations = sorted(
            (v for (k, p), v in found.items() if k == "write" or p not in written),
            key=lambda v: (v.kind, v.path),
        )
        report.notes = list(notes.values())
        report.refused_outside = list(refused)
        return report

    def _one(self, access: Access, found: dict, notes: dict, refused: dict) -> None:
        path = access.real or access.path
        if (
            access.kind in ("probe", "list")
            or not path.startswith("/")
            or _under_any(path, _PSEUDO)
        ):
            return
        if _under(path, self.tmpdir):
            return
        if access.kind in ("write", "rdwr"):
            self._write(access.path, access, found, refused)
        elif access.kind == "lookup":
            self._lookup(path, access, found)
        else:
            self._read(path, access, found, notes)

    # ------------------------------------------------------------ writes

    def _write(self, path: str, access: Access, found: dict, refused: dict) -> None:
        spec = self.spec
        if not _under(path, spec.root):
            if access.errno in _REFUSED and not _covered(path, spec.ignore_write):
                refused.setdefault(path, None)
            return
        if os.path.basename(path) in CONFIG_FILES and os.path.dirname(path) in (
            spec.project,
            spec.root,
        ):
            hint = "none: a task never writes vx config files, package.json, lockfiles or install settings"
            found.setdefault(("write", path), Violation("write", spec.rel(path), hint))
            return
        if (
            _covered(path, spec.writes)
            or _covered(path, self.layout.scratch)
            or _covered(path, spec.ignore_write)
        ):
            return
        if access.syscall.startswith("mkdir") and any(
            _under(g.base, path) for g in self.layout.scratch
        ):
            return  # the directory a scratch glob (`build/.*.tmp/**`) needs before it can match
        if _under(path, spec.project) and not self._other_project(path):
            hint = f'allow.write "{spec.grant_text(path)}"'
        else:
            hint = "none: a task writes only inside its own project"
        found.setdefault(("write", path), Violation("write", spec.rel(path), hint))

    # ------------------------------------------------------------ reads

    def _read(self, path: str, access: Access, found: dict, notes: dict) -> None:
        spec = self.spec
        if not _under(path, spec.root):
            if not _covered(access.path, self.readable):
                self._credential_note(access.path, notes)
            return
        if (
            not access.ok
        ):  # where the host would have taken it: a link in node_modules to a withheld package
            path = self.realpath(path)
        if (
            _covered(path, self.readable)
            or _covered(path, spec.ignore_read)
            or _under_any(path, self.deps)
        ):
            return
        hint = self._read_hint(path)
        if hint is not None and self.is_file(path):
            found.setdefault(("read", path), Violation("read", spec.rel(path), hint))

    def _lookup(self, path: str, access: Access, found: dict) -> None:
        """A refused stat/access/readlink of an existing file of the task's own project, or of a
        directory of the root project's, that a read grant would allow: the tool saw ENOENT and
        may never open it (it reports nothing). Judged where the host would have taken it, as a
        failed read is: `lib/x.js` through `lib -> ../../shared` is `shared/x.js`."""
        spec = self.spec
        path = self.realpath(path)
        owner = self._other_project(path)
        if access.errno not in ("ENOENT", "EACCES") or not (
            (owner is None and _under(path, spec.project)) or self._in_root_directory(path, owner)
        ):
            return
        if (
            _covered(path, self.readable)
            or _covered(path, spec.ignore_read)
            or _under_any(path, self.deps)
        ):
            return
        if _under_any(path, spec.walls) or not self.is_file(path):
            return
        found.setdefault(
            ("read", path),
            Violation("read", spec.rel(path), f'allow.read "{spec.grant_text(path)}"'),
        )

    def _read_hint(self, path: str) -> str | None:
        """The grant (or edge) that would allow a read, or None when the path is not reported."""
        spec = self.spec
        owner = self._other_project(path)
        rooted = owner is None or owner[0] == spec.root  # the task's own project's, or the root's
        if _under_any(path, spec.walls) and rooted:
            return None  # .git, .vx, the cache dir: the sandbox working
        if owner is None and _under(path, spec.project):
            return f'allow.read "{spec.grant_text(path)}"'
        if rooted and os.path.dirname(path) == spec.root:
            return None  # a root-level file: tools probe upward all the time
        if owner is not None and owner[0] in spec.withheld:
            directory, name = owner
            if name in spec.passed_over:
                return (
                    f"dependsOn a task of {name} keyed on its files ({name} declares no build, "
                    "and an Nx project's implicit one keys none of them): the key folds no task "
                    f"of {name}, so the sandbox withholds it"
                )
            implicit = (
                f" ({name} declares none: the implicit one keys its files)"
                if name in spec.implicit_builds
                else ""
            )
            return (
                f'dependsOn "{name}#build"{implicit}: the key folds no task of {name}, '
                "so the sandbox withholds it"
            )
        return f'allow.read "{spec.grant_text(path)}"'

    def _in_root_directory(self, path: str, owner: tuple[str, str] | None) -> bool:
        """In a directory of the root project (`shared/x.js`), not a root-level file."""
        root = self.spec.root
        rooted = owner[0] == root if owner else not _under(path, self.spec.project)
        return rooted and _under(path, root) and os.path.dirname(path) != root

    def _other_project(self, path: str) -> tuple[str, str] | None:
        """The deepest project holding `path` when that is not the task's own, else None."""
        best: tuple[str, str] | None = None
        for directory, name in self.spec.projects.items():
            if _under(path, directory) and (best is None or len(directory) > len(best[0])):
                best = (directory, name)
        own = self.spec.project
        if best is not None and _under(path, own) and len(own) >= len(best[0]):
            return None
        return best

    def _credential_note(self, path: str, notes: dict) -> None:
        for store in self.stores:
            if _under(path, store) and os.path.lexists(store):
                text = self.spec.grant_text(path)
                notes.setdefault(
                    store,
                    f"{self.spec.task}: the sandbox hid {text}, a credential store; "
                    f'if the task needs it, grant it: allow.read "{text}"',
                )
                return


def judge(accesses: Iterable[Access], spec: SandboxSpec, layout: Layout, tmpdir: str) -> Report:
    """Classify one attempt's accesses (see the module docstring)."""
    return Judge(spec, layout, tmpdir).judge(accesses)


def _covered(path: str, grants: Iterable[Grant]) -> bool:
    return any(g.covers(path) for g in grants)


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _under_any(path: str, tops: Iterable[str]) -> bool:
    return any(_under(path, top) for top in tops)
