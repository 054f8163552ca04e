"""The date a kept build info is given before a miss runs `tsc -b` on it (docs/caching.md
§ Incremental tools).

`tsc -b` skips a project it finds up to date: every root file (the config's own sources) and
config no newer than the build info, every referenced project up to date, and nothing emitted
then. It never looks at the other files of the program (declarations reached through
node_modules, a referenced project's outputs) nor at what module resolution found, so a build
info newer than one of those that changed would leave its outputs stale. When it builds, its
state compares every file by content, whatever the clock says.

So a kept build info gets a time T of this workspace's own clock, no later than the first read of
what its entry was built from (`KeptSince.since_ns`: a save's task start, a restore's file
listing), only when nothing tsc would not see changed since then: each path below whose ctime —
which no tool sets back — is not earlier is a change, unless it still shows the stamp vx gave it
as an output of the entry or of an entry upstream of it (those hold what the build info was
built from). A change to a root file or a config is allowed when its mtime is newer than T (tsc
compares it by content); any other is not. Otherwise the build info is dated to the epoch, and
tsc checks its whole program.

The paths: the program's files; the folders of the files that are not roots (a new file beside
one may change what an import finds); every folder tsc may take a root from (the config's
`include`, walked: a new source with an old mtime, moved in or unpacked, would be a root tsc does
not see); the config and each file it extends; the package.json nearest to each folder; each
`node_modules` and `node_modules/@types` above them, and `typeRoots`; the workspace's lockfiles
and install state (an install changes what resolution finds).
"""

from __future__ import annotations

import os
import re
import stat
from typing import TYPE_CHECKING, Callable, Collection, Iterable

from vx.witness import COARSE_RACY_NS

if TYPE_CHECKING:
    from vx.engine.tsconfig import Config
    from vx.store.local import KeptSince

MS = 1_000_000
# What tsc takes as a source or resolves to: what a new file in a source folder must not be
# unless tsc sees it (a new root newer than the build info).
_SOURCE = re.compile(r"\.(?:[mc]?tsx?|[mc]?jsx?|json)$")
# What an import finds ahead of a declaration or a script: TypeScript files, and package.json.
_FOUND_FIRST = re.compile(r"(?:\.[mc]?tsx?|(?:^|/)package\.json)$")
# Never walked for roots: tsc's wildcards skip these and every dot-named folder.
_NOT_WALKED = frozenset({"node_modules", "bower_components", "jspm_packages"})
# Rewritten by every install: a change means what resolution finds may have moved.
_INSTALL_STATE = (
    "package-lock.json",
    "npm-shrinkwrap.json",
    "pnpm-lock.yaml",
    "yarn.lock",
    "bun.lock",
    "bun.lockb",
    ".pnp.cjs",
    "node_modules/.modules.yaml",
    "node_modules/.package-lock.json",
    "node_modules/.yarn-state.yml",
    "node_modules/.yarn-integrity",
)


class _Unsafe(Exception):
    """A change tsc's timestamps would not show: the build info goes to the epoch."""


class Dating:
    """The time each kept build info of one entry may be given. What the checks read of the disk,
    and what passed them, is shared between its build infos (a library's and its tests')."""

    def __init__(self, root: str, noted: KeptSince, stamps: dict[str, tuple[int, int]]) -> None:
        """`noted` is the entry's note; `stamps` the note's, by absolute path."""
        self.root = root
        self.check = _Check(noted.since_ns, noted.dated_ns, stamps)

    def time_for(
        self, files: Collection[str], roots: Collection[str], config: Config | None
    ) -> int | None:
        """T (ns, a whole millisecond: when the entry was saved or restored here) for a kept
        build info whose program is `files` (absolute), of which `roots` are the config's own
        sources; None when a change since the note is one tsc's timestamp check would miss, or
        when vx cannot tell (no config read in full)."""
        if config is None or not config.complete:
            return None
        try:
            self.check.all(self.root, files, roots, config)
        except (_Unsafe, OSError):
            return None
        return self.check.t


class _Check:
    """The rules, with what passed them remembered (a failure stops at once and is not)."""

    def __init__(self, since_ns: int, dated_ns: int, stamps: dict[str, tuple[int, int]]) -> None:
        self.since = since_ns
        self.t = dated_ns - dated_ns % MS
        self.stamps = stamps
        self.seen: dict[str, os.stat_result | None] = {}
        self.passed: set[str] = set()  # folders that passed `folder`
        self.walked: set[str] = set()  # folders (real paths) walked whole for roots
        self.above: set[str] = set()  # folders whose node_modules, and all above, passed
        self.manifests: set[str] = set()  # folders whose nearest package.json passed

    def all(
        self, root: str, files: Collection[str], roots: Collection[str], config: Config
    ) -> None:
        for path in config.chain:
            self.root(path)
        folders = set()
        for path in files:
            if path in roots:
                self.root(path)
            else:
                self.unchanged(path)
                self.folder(os.path.dirname(path))
            folders.add(os.path.dirname(path))
        for path in config.files:
            self.root(path)
        self.sources(config)
        here = os.path.dirname(config.path)
        for folder in {*folders, here}:
            self.resolution(folder)
        for where in config.options.get("typeRoots") or ():
            if isinstance(where, str):
                self.unchanged_if_there(os.path.join(here, where))
        for name in _INSTALL_STATE:
            self.unchanged_if_there(os.path.join(root, name))

    # ---------------------------------------------------------------- one path

    def lstat(self, path: str) -> os.stat_result | None:
        if path not in self.seen:
            try:
                self.seen[path] = os.lstat(path)
            except FileNotFoundError:
                self.seen[path] = None
        return self.seen[path]

    def changed(self, path: str, st: os.stat_result) -> bool:
        """Changed since `since`: its ctime is not earlier (whole-second ctimes, a tick
        earlier), and it does not show the stamp vx gave it as an output."""
        ctime = st.st_ctime_ns
        reach = COARSE_RACY_NS if ctime % 1_000_000_000 == 0 else 0
        if ctime < self.since - reach:
            return False
        return self.stamps.get(path) != (st.st_ino, ctime)

    def unchanged(self, path: str) -> None:
        """A file tsc does not look at: there, and not changed (through a link, neither)."""
        st = self.lstat(path)
        if st is None or self.changed(path, st):
            raise _Unsafe(path)
        if stat.S_ISLNK(st.st_mode):
            target = os.path.realpath(path)
            if target != path:
                self.unchanged(target)

    def unchanged_if_there(self, path: str) -> None:
        st = self.lstat(path)
        if st is not None and self.changed(path, st):
            raise _Unsafe(path)

    def root(self, path: str) -> None:
        """A file tsc compares with the build info's time: gone (tsc sees that too), unchanged,
        or newer than T by a whole millisecond (tsc reads times to the millisecond)."""
        st = self.lstat(path)
        if st is None or not self.changed(path, st):
            if st is not None and stat.S_ISLNK(st.st_mode):
                self.root(os.path.realpath(path))
            return
        mtime = os.stat(path).st_mtime_ns
        if mtime < self.t + MS:
            raise _Unsafe(path)

    # ---------------------------------------------------------------- folders

    def folder(self, path: str) -> None:
        """A folder holding a file of the program that is not a root: nothing in it that could
        win an import over a file of the program changed, but what vx wrote there as an output
        (a restored folder of declarations); nor, in the folder above, a file named as this one
        (`./x` finds `x.ts` before `x/index.d.ts`)."""
        if path in self.passed:
            return
        st = self.lstat(path)
        if st is None:
            raise _Unsafe(path)
        if self.changed(path, st):
            self.shadows(path, lambda name: True)
        parent, name = os.path.split(path)
        above = self.lstat(parent)
        if above is not None and self.changed(parent, above):
            self.shadows(parent, lambda entry: entry.split(".", 1)[0] == name)
        self.passed.add(path)

    def shadows(self, path: str, named: Callable[[str], bool]) -> None:
        """No entry of the folder that an import could find ahead of a file of the program
        (a TypeScript file, a package.json, a link, a folder of those) changed but as vx wrote it."""
        with os.scandir(path) as entries:
            for entry in entries:
                if not named(entry.name):
                    continue
                est = self.lstat(entry.path)
                if est is None or not self.changed(entry.path, est):
                    continue
                if stat.S_ISDIR(est.st_mode):
                    self.shadows(entry.path, named=lambda _: True)
                elif stat.S_ISLNK(est.st_mode) or _FOUND_FIRST.search(entry.name):
                    raise _Unsafe(entry.path)

    def sources(self, config: Config) -> None:
        """Every folder tsc may take a root from: a file added there since (a change of the
        folder) must be newer than T, so that tsc, finding a new root, sees it."""
        here = os.path.dirname(config.path)
        patterns = config.include if config.include is not None else (os.path.join(here, "**"),)
        for pattern in patterns:
            parts = pattern.split(os.sep)
            cut = next((i for i, p in enumerate(parts) if "*" in p or "?" in p), len(parts))
            base = os.sep.join(parts[:cut]) or os.sep
            if os.path.isdir(base):
                self.walk(base)
            elif os.path.lexists(base):
                self.root(base)  # a file named outright
            else:  # a folder that is not there yet: its making shows in the nearest one that is
                for above in _ancestors(os.path.dirname(base)):
                    if os.path.lexists(above):
                        self.unchanged_if_there(above)
                        break

    def walk(self, path: str, visiting: set[str] | None = None) -> None:
        real = os.path.realpath(path)
        visiting = set() if visiting is None else visiting
        if real in self.walked or real in visiting:
            return
        visiting.add(real)
        st = self.lstat(path)
        if st is None:
            return
        changed = self.changed(path, os.stat(path)) if stat.S_ISLNK(st.st_mode) else False
        changed = changed or self.changed(path, st)
        with os.scandir(path) as entries:
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                if entry.is_dir():  # tsc follows a linked folder too
                    if entry.name not in _NOT_WALKED:
                        self.walk(entry.path, visiting)
                    continue
                if changed and _SOURCE.search(entry.name):
                    est = self.lstat(entry.path)
                    if est is not None and stat.S_ISLNK(est.st_mode):
                        if self.changed(entry.path, est):
                            raise _Unsafe(entry.path)  # a new link: its target's time is not one
                    self.root(entry.path)
        self.walked.add(real)

    # ---------------------------------------------------------------- resolution

    def resolution(self, folder: str) -> None:
        """What resolution finds from `folder`: the package.json nearest to it, and each
        node_modules (and its @types) above it, unchanged."""
        self.nearest_manifest(folder)
        passed = []
        for above in _ancestors(folder):
            if above in self.above:
                break
            modules = os.path.join(above, "node_modules")
            if self.lstat(modules) is not None:
                self.unchanged_if_there(modules)
                self.unchanged_if_there(os.path.join(modules, "@types"))
            passed.append(above)
        self.above.update(passed)

    def nearest_manifest(self, folder: str) -> None:
        passed = []
        for above in _ancestors(folder):
            if above in self.manifests:
                break
            passed.append(above)
            manifest = os.path.join(above, "package.json")
            st = self.lstat(manifest)
            if st is not None:
                if self.changed(manifest, st):
                    raise _Unsafe(manifest)
                break
        self.manifests.update(passed)


def _ancestors(folder: str) -> Iterable[str]:
    while True:
        yield folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return
        folder = parent
