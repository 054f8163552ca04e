"""One bulk git enumeration of the workspace, parsed into a listing.

`ls-files`, `status` and `config` are spawned together and read once per run; their output
becomes the sorted candidate paths, the clean tracked files git vouches for (with their index
OIDs) and what it ignores. The trust checks decide whether git can be trusted at all; outside a
git repo (or inside an ignored dir) the tree is walked instead.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Iterable, Sequence

from msgspec import Struct

from vx import witness
from vx.errors import EnvironmentFailure, UsageError
from vx.files.tree import not_skipped, walk_files

_MODE_PREFIX = {"100755": "100755:", "120000": "120000:"}
MEMO = "attributes.json"  # the attribute verdicts, beside the blob memo
_CLEAN_FILTER_ATTRS = frozenset({"text", "eol", "crlf", "ident", "filter", "working-tree-encoding"})
_UNMERGED = frozenset({"DD", "AU", "UD", "UA", "DU", "AA", "UU"})


class Listing(Struct):
    """What one enumeration learnt: candidate paths and what git vouches for."""

    paths: list[str]  # sorted: tracked and present, plus untracked (not ignored)
    trusted: dict[str, str]  # clean tracked path -> identity (mode prefix + index OID)
    untracked: frozenset[str]
    ignored_dirs: frozenset[str]  # no trailing slash
    ignored_files: frozenset[str]
    algo: str = "sha1"
    git: bool = True
    links: tuple[
        str, ...
    ] = ()  # candidate paths that may be symlinks (vx.files.links follows them)
    remotes: tuple[tuple[str, str], ...] = ()  # (name, URL) of each remote: the shared store's id
    dirty: bool | None = None  # a changed, deleted or untracked file in the workspace; None: no git
    # trusted paths a clean filter could have converted: their bytes are not pinned by the
    # listing alone (`git add` of a CRLF copy changes only the index's stat data)
    converted: frozenset[str] = frozenset()


def check_ref(ref: str) -> str:
    """A ref vx will hand to git: no option, no range, no `^x`, no `ref:path`."""
    if (
        not ref
        or ref.startswith(("-", "^"))
        or ".." in ref
        or ":" in ref
        or any(c.isspace() for c in ref)
    ):
        raise UsageError(
            f"--affected={ref}: not a ref vx will compare against",
            hint="name a branch, tag or commit, e.g. --affected=origin/main",
        )
    return ref


def repo_root(root: Path) -> Path | None:
    """The nearest directory at or above root holding `.git` (a dir, or a worktree's file)."""
    for d in (root, *root.parents):
        witness.probed(os.path.join(d, ".git"))
        if (d / ".git").exists():
            return d
    return None


def _git_dir(toplevel: Path) -> Path:
    """The common git dir (where `info/attributes` lives), following worktree `.git` files."""
    dot = toplevel / ".git"
    if dot.is_dir():
        return dot
    witness.read(str(dot))
    try:
        text = dot.read_text()
    except OSError:
        return dot
    gitdir = Path(text.partition("gitdir:")[2].strip())
    gitdir = gitdir if gitdir.is_absolute() else toplevel / gitdir
    common = gitdir / "commondir"
    witness.read(str(common))
    if common.is_file():
        return (gitdir / common.read_text().strip()).resolve()
    return gitdir


def _spawn_git(cwd: Path, args: Sequence[str]) -> subprocess.Popen:
    # Optional locks stay on: `git status` then writes back the stat data it refreshed, as it does
    # for the user. With them off, files committed in the same second as written stay "racy" and
    # git re-reads every one of them on every run, which costs the warm path its zero reads.
    return subprocess.Popen(
        ["git", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _collect(proc: subprocess.Popen, what: str, root: Path, required: bool = True) -> str:
    """Read a spawned git to the end; refuse plainly (never a traceback) if it failed."""
    out, err = proc.communicate()
    witness.ran(proc.args, proc.returncode, out)
    if proc.returncode != 0 and not required:
        return ""
    if proc.returncode != 0:
        message = err.decode("utf-8", "replace").strip().splitlines()
        hint = "run `git status` in the workspace to see what git objects to"
        if any("dubious ownership" in line for line in message):
            hint = f"trust the repository: git config --global --add safe.directory {root}"
        raise EnvironmentFailure(
            f"git could not list the workspace files ({what})",
            facts=(f"in: {root}", *(message[:3] or [f"exit {proc.returncode}"])),
            hint=hint,
        )
    return out.decode("utf-8", "surrogateescape")


def spawn_git_listing(root: Path) -> tuple[subprocess.Popen, ...]:
    """Spawn the three listings at once; `_run_git_listing` reads them."""
    return (
        _spawn_git(root, ["ls-files", "-s", "-v", "-z"]),
        _spawn_git(
            root,
            [
                "status",
                "--porcelain=v1",
                "-z",
                "-uall",
                "--ignored=matching",
                "--no-renames",
                "--",
                ".",
            ],
        ),
        _spawn_git(root, ["config", "-z", "--list"]),
    )


def _run_git_listing(
    root: Path, procs: tuple[subprocess.Popen, ...] | None = None
) -> tuple[str, str, str]:
    """Read the three listings (spawning them first unless `procs` already runs them)."""
    procs = procs or spawn_git_listing(root)
    try:
        ls = _collect(procs[0], "ls-files", root)
        status = _collect(procs[1], "status", root)
        config = _collect(procs[2], "config", root, required=False)
    finally:
        for proc in procs:
            let_finish(proc)
    return ls, status, config


GIT_FINISH_S = 2.0  # how long a git no longer needed may take to finish before it is stopped


def let_finish(proc: subprocess.Popen) -> None:
    """Reap a git the run no longer needs (it failed, or a refusal came first), letting it finish
    if it will: `git status` holds .git/index.lock while it lists, and removes it on a signal only
    once its handler is installed, just after creating the file, so stopping it at that moment
    would leave the repository locked. Past GIT_FINISH_S it is stopped anyway — SIGTERM, which it
    can catch and clean up after, never SIGKILL."""
    try:
        proc.communicate(timeout=GIT_FINISH_S)  # at once for one that has exited: closes its pipes
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.communicate()


_LS_FILES_RECORD = re.compile(r"(\S) (\d+) ([0-9a-f]+) (\d)\t([^\0]*)\0")


def index_stamp(toplevel: Path) -> str:
    """What identifies the index file as it is now: its stat and its trailing checksum (zeros
    under `index.skipHash`, which a rename's new inode still tells apart); "" when there is none
    to read, and then nothing is memoised. Read after the listing: verdicts judged from a later
    index are then kept under a stamp no index will have again, never the other way round. Not
    witnessed: it only picks a memo entry, and every verdict in one holds of the index it names.
    """
    if os.environ.get("GIT_INDEX_FILE"):
        return ""
    dot = toplevel / ".git"
    try:
        if dot.is_dir():
            path = dot / "index"
        else:
            gitdir = Path(dot.read_text().partition("gitdir:")[2].strip())
            path = (gitdir if gitdir.is_absolute() else toplevel / gitdir) / "index"
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            f.seek(max(0, st.st_size - 32))
            tail = f.read()
    except OSError:
        return ""
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{tail.hex()}"


def _parse_ls_files(text: str) -> tuple[dict[str, str], set[str], list[str], list[str]]:
    """Index identities (path -> mode prefix + OID), the paths git cannot vouch for, gitlinks,
    symlinks.

    Tag `H` at stage 0 is a normal cached entry; lowercase tags are assume-unchanged, `S`
    skip-worktree and stages 1-3 a conflict — `git status` does not check any of those.
    One regex over the whole listing keeps the per-file cost in C.
    """
    entries: dict[str, str] = {}
    untrusted: set[str] = set()
    gitlinks: list[str] = []
    links: list[str] = []
    for tag, mode, oid, stage, path in _LS_FILES_RECORD.findall(text):
        if mode == "160000":
            gitlinks.append(path)
            continue
        if mode == "120000":
            links.append(path)
        if tag != "H" or stage != "0":
            untrusted.add(path)
        entries[path] = _MODE_PREFIX[mode] + oid if mode in _MODE_PREFIX else oid
    return entries, untrusted, gitlinks, links


class _Status(Struct):
    dirty: set[str]
    deleted: set[str]
    untracked: list[str]
    untracked_dirs: list[str]  # embedded repos, listed as `dir/`
    ignored_dirs: list[str]
    ignored_files: set[str]
    workspace_ignored: bool = False  # the workspace root itself lies in a gitignored dir


def _parse_status(text: str, prefix: str) -> _Status:
    """Sort `status --porcelain -z` records; its paths are repo-relative, so strip `prefix`."""
    st = _Status(set(), set(), [], [], [], set())
    cut = len(prefix)
    for record in text.split("\0"):
        if record.startswith("!! ") and record.endswith("/") and prefix.startswith(record[3:]):
            st.workspace_ignored = True
        if len(record) < 4 or not record.startswith(prefix, 3):
            continue
        xy, path = record[:2], record[3 + cut :]
        if xy == "??":
            (st.untracked_dirs if path.endswith("/") else st.untracked).append(path.rstrip("/"))
        elif xy == "!!":
            if path.endswith("/"):
                st.ignored_dirs.append(path.rstrip("/"))
            else:
                st.ignored_files.add(path)
        elif xy in _UNMERGED:
            st.dirty.add(path)
        elif xy[1] == "D":
            st.deleted.add(path)
        elif xy[1] != " ":
            st.dirty.add(path)
    return st


def _parse_config(text: str) -> dict[str, str]:
    config = {}
    for record in text.split("\0"):
        key, _, value = record.partition("\n")
        if key:
            config[key.lower()] = value
    return config


def _attributes_risky(text: str) -> bool:
    """Whether an attributes file could set a clean filter; macros count as risky."""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[attr]"):
            return True
        for token in line.split()[1:]:
            name = token.split("=", 1)[0]
            if name in _CLEAN_FILTER_ATTRS:  # `-text` and `!text` never convert
                return True
    return False


def _attributes_text(path: Path) -> str | None:
    """An attributes file's text; None when there is none, a marker that is always risky when
    it cannot be read."""
    witness.read(str(path))
    try:
        return path.read_text("utf-8", "replace")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError:
        return "[attr]unreadable"


def _attribute_files(
    root: Path, toplevel: Path, config: dict[str, str], paths: Iterable[str]
) -> list[Path]:
    """Every attributes file that could apply: in-tree, above the workspace, repo, global, system."""
    files = [root / p for p in paths if p == ".gitattributes" or p.endswith("/.gitattributes")]
    d = root
    while d != toplevel and toplevel in d.parents:
        d = d.parent
        files.append(d / ".gitattributes")
    files.append(_git_dir(toplevel) / "info" / "attributes")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    files.append(
        Path(os.path.expanduser(config.get("core.attributesfile", f"{xdg}/git/attributes")))
    )
    files.append(Path("/etc/gitattributes"))
    return files


def _stat_weakened(config: dict[str, str]) -> bool:
    """Whether `git status` may call a changed file clean: then git vouches for nothing."""
    if config.get("core.trustctime", "true").lower() in ("false", "0", "no", "off"):
        return True
    return config.get("core.checkstat", "default").lower() == "minimal"


def _vouched_for(
    root: Path,
    toplevel: Path,
    config: dict[str, str],
    trusted: dict[str, str],
    paths: Iterable[str],
    memo_path: Path | None,
) -> tuple[dict[str, str], frozenset[str]]:
    """The clean tracked files whose index OID names their bytes, and which of them a clean
    filter could have converted (vx.files.attributes): all of them, and none, unless an
    attributes file or `core.autocrlf` could set one."""
    if _stat_weakened(config):
        return {}, frozenset()
    autocrlf = config.get("core.autocrlf", "false").lower() in ("true", "input", "1", "yes", "on")
    files = _attribute_files(root, toplevel, config, paths)
    texts = [(str(f), t) for f in files if (t := _attributes_text(f)) is not None]
    if not autocrlf and not any(_attributes_risky(t) for _, t in texts):
        return trusted, frozenset()
    from vx.files import attributes  # only a workspace with attributes that convert pays for it

    core = sorted((k, v) for k, v in config.items() if k.startswith("core."))
    facts = repr((texts, core))
    return attributes.judge(root, trusted, autocrlf, index_stamp(toplevel), facts, memo_path)


def git_listing(
    root: Path,
    toplevel: Path,
    procs: tuple[subprocess.Popen, ...] | None = None,
    memo_path: Path | None = None,
) -> Listing:
    """Turn one bulk enumeration into sorted candidates and trusted identities. `memo_path` is
    the blob memo the attribute verdicts are kept beside."""
    ls, status_text, config_text = _run_git_listing(root, procs)
    prefix = root.relative_to(toplevel).as_posix()
    prefix = "" if prefix == "." else prefix + "/"
    entries, untrusted, gitlinks, links = _parse_ls_files(ls)
    st = _parse_status(status_text, prefix)
    if st.workspace_ignored:  # git would call every file ignored: key by content instead
        return walk_listing(root)
    config = _parse_config(config_text)
    present = [p for p in entries if p not in st.deleted]
    untracked = list(st.untracked)
    for d in (*gitlinks, *st.untracked_dirs):  # nested repos, by content
        untracked += walk_files(root, d, not_skipped)
    paths = sorted(set(present).union(untracked))
    untrusted |= st.dirty
    trusted, converted = _vouched_for(
        root,
        toplevel,
        config,
        {p: entries[p] for p in present if p not in untrusted},
        [*paths, *st.ignored_files],
        memo_path and memo_path.with_name(MEMO),
    )
    algo = "sha256" if config.get("extensions.objectformat") == "sha256" else "sha1"
    # A tracked link is known by its mode; an untracked or changed path may have become one.
    known = set(links)
    maybe = [p for p in links if p not in st.deleted] + [
        p for p in (*st.dirty, *untracked) if p not in known
    ]
    return Listing(
        paths,
        trusted,
        frozenset(untracked),
        frozenset(st.ignored_dirs),
        frozenset(st.ignored_files),
        algo,
        links=tuple(maybe),
        remotes=tuple(
            (key[7:-4], value)
            for key, value in config.items()
            if key.startswith("remote.") and key.endswith(".url")
        ),
        dirty=bool(st.dirty or st.deleted or st.untracked or st.untracked_dirs),
        converted=converted,
    )


def walk_listing(root: Path) -> Listing:
    """No git: every file under the root is a candidate, hashed from disk."""
    paths = sorted(walk_files(root, "", not_skipped))
    return Listing(
        paths, {}, frozenset(paths), frozenset(), frozenset(), git=False, links=tuple(paths)
    )
