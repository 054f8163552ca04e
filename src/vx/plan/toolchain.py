"""What a task runs with beyond its files and env: the Node version on its PATH, in every
key, and the `inputs.runtime` / `inputs.workspaceRuntime` probes a task declares.

Node: the `node` a task's PATH leads to (its project's and the root's `node_modules/.bin`, then
the host's PATH) is found by stat, once per directory per run. Its version is `node -v`, run only
for a binary vx has not seen — memoised in `<cacheDir>/toolchains.json` by the real path and its
stat — so switching Node (nvm, a new PATH, a replaced symlink) misses every task and switching
back hits, while a warm run spawns nothing. Every path looked at is witnessed, so a receipt sees
a switch too.

Probes: run through `sh -c` (the project dir for `runtime`, the root for `workspaceRuntime`,
each command once per run there), with vx's own environment and the task's PATH. Trimmed stdout
and stderr are folded apart. A probe that exits non-zero or prints what is not UTF-8 refuses the
run: a key cannot be taken on a failed probe.
"""

from __future__ import annotations

import os
import stat

from vx import witness
from vx.errors import EnvironmentFailure

MEMO = "toolchains.json"


class Toolchain:
    """One run's view: where `node` is for each PATH, its version, and the probes' outputs."""

    def __init__(self, cache_dir: str | None, root: str):
        self.root = root
        self._memo_path = os.path.join(cache_dir, MEMO) if cache_dir else None
        self._memo: dict | None = None
        self._dirty = False
        self._in_dir: dict[str, str | None] = {}  # PATH directory -> its executable `node`, or None
        self._version: dict[str, str] = {}  # node path -> version
        self._by_path: dict[
            str, str
        ] = {}  # a PATH value (or a tail of one) -> the version it leads to
        self._probes: dict[
            tuple[str, str], tuple[str, str]
        ] = {}  # (dir, command) -> (stdout, stderr)

    # ------------------------------------------------------------ node

    def node(self, path_value: str) -> str:
        """The version of the `node` `path_value` (a PATH) leads to; "absent" when none. A task's
        PATH is its bin dirs ahead of a tail every task shares: each tail is resolved once."""
        version = self._by_path.get(path_value)
        if version is None:
            head, sep, rest = path_value.partition(os.pathsep)
            found = self._node_in(head or os.curdir)
            version = (
                self._of(found) if found is not None else (self.node(rest) if sep else "absent")
            )
            self._by_path[path_value] = version
        return version

    def node_path(self, path_value: str) -> str | None:
        """The real path of the `node` `path_value` leads to (what `process.execPath` says), or
        None: what a package manager sets as `NODE` and `npm_node_execpath`."""
        for directory in path_value.split(os.pathsep):
            found = self._node_in(directory or os.curdir)
            if found is not None:
                return os.path.realpath(found)
        return None

    # ------------------------------------------------------------ package manager

    def manager(self, command: str, packages: tuple[str, ...], path_value: str) -> tuple[str, str]:
        """(version, Node version) of the package manager `command` that `path_value` leads to,
        "" where not known: the version from the package.json of its npm package (one of
        `packages`) beside the real binary, else, for bun (a native binary), what it prints —
        memoised as `node -v` is, so a warm run spawns nothing. Bun names its own Node version.
        Not keyed: as for any tool PATH finds, only its use in a task's environment."""
        binary = _executable(command, path_value)
        if binary is None:
            return "", ""
        real = os.path.realpath(binary)
        try:
            st = os.stat(real)
        except OSError:
            return "", ""
        ident = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        memo = self._load()
        entry = f"manager:{command}:{real}"
        known = memo.get(entry)
        if known is not None and known[0] == ident:
            return known[1], known[2]
        version = _package_version(real, packages)
        node = ""
        if command == "bun":
            printed = _printed([binary, "-p", "Bun.version + ' ' + process.version"]).split()
            if len(printed) == 2:
                version, node = version or printed[0], printed[1]
        memo[entry] = [ident, version, node]
        self._dirty = True
        return version, node

    def _of(self, found: str) -> str:
        version = self._version.get(found)
        if version is None:
            version = self._version[found] = self._version_of(found)
        return version

    def _node_in(self, directory: str) -> str | None:
        if directory in self._in_dir:
            return self._in_dir[directory]
        path = os.path.join(directory, "node")
        found = None
        try:
            st = os.stat(path)
            if stat.S_ISREG(st.st_mode) and os.access(path, os.X_OK):
                found = path
        except OSError:
            pass
        if found is None:
            witness.probed(path)
        else:
            witness.read(path)
        self._in_dir[directory] = found
        return found

    def _version_of(self, path: str) -> str:
        real = os.path.realpath(path)
        for p in (path, real):  # what resolving the links looked at: a receipt checks it again
            head = os.path.dirname(p)
            while head and head != os.path.dirname(head):
                witness.probed(head)
                head = os.path.dirname(head)
        witness.read(real)
        st = os.stat(real)
        ident = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        memo = self._load()
        known = memo.get(real)
        if known is not None and known[0] == ident:
            return known[1]
        import subprocess

        try:
            proc = subprocess.run(
                [path, "-v"], capture_output=True, timeout=60, stdin=subprocess.DEVNULL
            )
            version = proc.stdout.decode("utf-8", "replace").strip() if proc.returncode == 0 else ""
        except (OSError, subprocess.SubprocessError):
            version = ""
        version = version or f"unknown ({real})"  # not a working node: keyed by where it is
        memo[real] = [ident, version]
        self._dirty = True
        return version

    def _load(self) -> dict:
        if self._memo is None:
            self._memo = {}
            if self._memo_path is not None:
                try:
                    import json

                    with open(self._memo_path, encoding="utf-8") as f:
                        data = json.load(f)
                    self._memo = data if isinstance(data, dict) else {}
                except (OSError, ValueError):
                    pass
        return self._memo

    def save(self) -> None:
        """Write the version memo when this run learnt a binary (never on a warm run)."""
        if not self._dirty or self._memo_path is None:
            return
        import json

        from vx.dotvx import write_whole

        if not os.path.isdir(os.path.dirname(self._memo_path)):
            return  # the store makes the cache dir (with its .gitignore): the next run writes the memo
        try:
            write_whole(self._memo_path, json.dumps(self._memo).encode())
        except OSError:
            pass  # unwritable: the next run asks node again
        self._dirty = False

    # ------------------------------------------------------------ probes (inputs.runtime)

    def probe(self, task: str, directory: str, command: str, path_value: str) -> tuple[str, str]:
        """`command`'s trimmed (stdout, stderr), run once per run in `directory` (absolute)."""
        key = (directory, command)
        if key not in self._probes:
            self._probes[key] = self._run(task, directory, command, path_value)
        return self._probes[key]

    def _run(self, task: str, directory: str, command: str, path_value: str) -> tuple[str, str]:
        import subprocess

        env = {**os.environ, "PATH": path_value}
        try:
            proc = subprocess.run(
                ["sh", "-c", command],
                cwd=directory,
                env=env,
                capture_output=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise EnvironmentFailure(
                f"{task}: the runtime input `{command}` could not run: {exc}",
                hint="it runs with `sh -c` in the project directory",
            ) from None
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise EnvironmentFailure(
                f"{task}: the runtime input `{command}` exited with {proc.returncode}",
                facts=[f"stderr: {line}" for line in tail],
                hint="a key cannot be taken on a failed probe: fix the command or drop it",
            )
        try:
            return proc.stdout.decode("utf-8").strip(), proc.stderr.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise EnvironmentFailure(
                f"{task}: the runtime input `{command}` printed bytes that are not UTF-8",
                hint="key a text probe (e.g. a version), or pipe it through a hash",
            ) from None


def _executable(command: str, path_value: str) -> str | None:
    for directory in path_value.split(os.pathsep):
        path = os.path.join(directory or os.curdir, command)
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and os.access(path, os.X_OK):
            return path
    return None


def _package_version(real: str, packages: tuple[str, ...]) -> str:
    """The version in the package.json of the npm package (named one of `packages`) that holds
    `real`, a few levels up ("": none; a corepack shim is corepack's, not the manager's)."""
    import json

    head = os.path.dirname(real)
    for _ in range(3):
        try:
            with open(os.path.join(head, "package.json"), encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict):
            version = data.get("version")
            name = data.get("name")
            ours = name in packages or any(str(name).startswith(f"{p}.") for p in packages)
            if ours and isinstance(version, str):
                return version
            return ""
        head = os.path.dirname(head)
    return ""


def _printed(argv: list[str]) -> str:
    import subprocess

    try:
        proc = subprocess.run(argv, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.decode("utf-8", "replace").strip() if proc.returncode == 0 else ""
