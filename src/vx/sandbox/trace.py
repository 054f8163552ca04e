"""Trace what a sandboxed task touched: the strace command line, and a streaming parser.

strace runs *outside* the sandbox and traces bwrap and everything under it, so the tracer and
its trace file are out of the task's reach: not in its pid namespace (no `/proc/<pid>/fd`, no
`kill`, no `PTRACE_ATTACH` — every process inside already has strace as its tracer), and no fd
of the trace is inherited (strace opens the file itself, close-on-exec). `-DD` so that a
background child can never hold the run open, `--seccomp-bpf` so that only the listed syscalls
stop, `-y` so that fds and `AT_FDCWD` carry their paths (as the sandbox sees them), and `-xx`
so that every string and decoration is pure `\\xHH` — no quote, `<` or `) = ` can hide in a
path, which keeps a regex parser safe (sandbox.md §4.8, §4.9, pitfalls 12-22).

bwrap's own set-up (its mkdirs and opens under `/newroot`) is traced too and dropped: with
`sandbox=True` the parser counts nothing before the first `execve` of a process other than
bwrap, and nothing afterwards from the processes that were there before it (bwrap and its pid
1). It also says whether the trace is whole: the task started, and bwrap's exit is in it.

The parser keeps O(1) state per pid: the text of an unfinished call, and the cwd, which
legacy calls (`mkdir`, `rename`, `chdir` without a dirfd) resolve against and which a
child inherits from the `clone`/`fork` that made it.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from typing import Iterable, Iterator

from msgspec import Struct

SYSCALLS = (
    "open", "openat", "openat2", "creat", "truncate", "execve", "execveat",
    "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2",
    "link", "linkat", "symlink", "symlinkat", "chdir", "fchdir",
    "clone", "clone3", "fork", "vfork", "io_uring_setup",
    "name_to_handle_at", "open_by_handle_at",
)  # fmt: skip
# Decoded in full (the rest is `verbose=none`): a file handle's bytes, which name_to_handle_at
# ties to a path and open_by_handle_at opens by (strace does not decorate the fd it returns).
HANDLES = "verbose=name_to_handle_at,open_by_handle_at"
# Traced in the sandbox only: a tool that stats before it opens (`cp`, node's `require`,
# `test -f`) never opens a file the sandbox hid; its refused lookup is what shows the missing grant.
# Not readlink: glibc's realpath calls it on every component (a third of `tsc -b`'s traced calls,
# each two ptrace stops), and what a tool resolves it then stats or opens.
LOOKUPS = ("stat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2")


def strace_argv(strace: str, output: str) -> list[str]:
    """The strace prefix that traces the command after it (bwrap), writing to `output`."""
    return [
        strace, "-DD", "-f", "-q", "-y", "-xx", "--seccomp-bpf", "-e", "signal=none",
        "-e", HANDLES,  # no stat buffer or clone3 struct decoded: only paths, flags and results are read
        "-e", "trace=" + ",".join(SYSCALLS + LOOKUPS),
        "-e", "inject=io_uring_setup:error=ENOSYS",  # io_uring file ops are invisible to ptrace
        "-o", output, "--",
    ]  # fmt: skip


class Access(Struct, frozen=True):
    """One file access the task made, resolved to an absolute path.

    `kind` is read, write, rdwr (opened O_RDWR: a write that may also read), exec, list (a
    directory opened to enumerate), probe (O_PATH), lookup (a refused stat, access or readlink)
    or unnamed (open_by_handle_at of a handle the trace never saw made: `path` is the mount's);
    `path` is what was asked for, lexically normalised; `real` the path the kernel opened
    (from `-y`) when the call succeeded and said so; `errno` is None on success.
    """

    pid: int
    kind: str
    syscall: str
    path: str
    errno: str | None = None
    real: str | None = None

    @property
    def ok(self) -> bool:
        return self.errno is None


# ---------------------------------------------------------------- lexing

_LINE = re.compile(r"\s*(\d+)\s+(.*)")
_RESUMED = re.compile(r"<\.\.\. \w+ resumed>\s?(.*)")
_CALL = re.compile(r"(\w+)\((.*)")
_TOKEN = re.compile(
    r'(AT_FDCWD|-?\d+)<([^<>]*)>|"([^"]*)"'
)  # -xx: no quote or angle bracket inside
_FLAG = re.compile(r"\bO_[A-Z]+\b")
_DECORATED = re.compile(r"-?\d+<([^<>]*)>")
_OPENAT = re.compile(
    r'\s*(\d+)\s+openat\(AT_FDCWD<([^<>]*)>, "([^"]*)", ([A-Z_|]+)(?:, \d+)?\)\s+= '
    r"(?:\d+<([^<>]*)>\s*$|-1 ([A-Z]+) \([^()]*\)\s*$)"
)
_HEX = re.compile(r"\\x([0-9a-f]{2})")
_HANDLE = re.compile(r"handle_type=(-?\d+), f_handle=(\"[^\"]*\"|0x[0-9a-f]+)")
_UNFINISHED = " <unfinished ...>"
_NOT_FINAL = ("ERESTARTSYS", "ERESTARTNOINTR", "ERESTARTNOHAND", "ERESTART_RESTARTBLOCK", "EINTR")
_WRITE_FLAGS = frozenset({"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC"})


def _decode(text: str) -> str:
    """Decode strace's `-xx` escapes back to a file-system path (undecodable bytes kept)."""
    if "\\x" not in text:
        return text
    if (
        len(text) % 4 == 0 and text.count("\\x") == len(text) // 4
    ):  # all escapes: the -xx norm, and fast
        try:
            return bytes.fromhex(text.replace("\\x", "")).decode(
                "utf-8", "surrogateescape"
            )  # os.fsdecode
        except ValueError:
            pass
    return os.fsdecode(_HEX.sub(lambda m: chr(int(m.group(1), 16)), text).encode("latin-1"))


# Memoised for what repeats: the same cwd decorates nearly every line, and a tool opens the same
# few directories over and over. Paths that are new on every line go through `_decode` directly.
unhex = functools.lru_cache(maxsize=8192)(_decode)


class _Call(Struct):
    """One complete syscall line, split: name, raw arguments, result, decoded return path."""

    pid: int
    name: str
    args: str
    ret: str
    errno: str | None
    ret_path: str | None


def _split_call(pid: int, text: str) -> _Call | None:
    """Split `name(args) = RET…`; None for anything else (exits, signals, a `?` result)."""
    match = _CALL.match(text)
    if match is None:
        return None
    cut = text.rfind(" = ")  # strace pads short calls: `vfork()       = 8`
    head, result = text[:cut].rstrip(), text[cut + 3 :]
    if cut < 0 or not head.endswith(")") or "(INJECTED)" in result:
        return None
    head = head[:-1]
    ret = result.split(" ", 1)[0]
    if ret == "?":
        return None
    errno = result.split(" ")[1] if ret.startswith("-") and " " in result else None
    if errno in _NOT_FINAL:
        return None
    decoration = _DECORATED.match(ret)
    ret_path = unhex(decoration.group(1)) if decoration else None
    return _Call(pid, match.group(1), head[len(match.group(1)) + 1 :], ret, errno, ret_path)


def _tokens(args: str) -> list[tuple[str, str]]:
    """The first path-ish arguments in order: ("fd", decoded path) or ("str", decoded string).

    Four at most (renameat's two pairs): execve's argv strings are never needed."""
    out = []
    for m in itertools.islice(_TOKEN.finditer(args), 4):
        out.append(
            ("fd", unhex(m.group(2))) if m.group(1) is not None else ("str", unhex(m.group(3)))
        )
    return out


# ---------------------------------------------------------------- the parser


class TraceParser:
    """Turn strace lines into Accesses, one line at a time, tracking each pid's cwd."""

    def __init__(self, cwd: str, *, sandbox: bool = False) -> None:
        self.initial_cwd = cwd
        self._cwd: dict[int, str] = {}
        self._pending: dict[int, str] = {}
        self._handles: dict[str, str] = {}  # a file handle (type, bytes) -> the path it was made of
        self.lines = 0
        self._setup: set[int] | None = (
            set() if sandbox else None
        )  # bwrap's own pids (sandbox traces)
        self.root: int | None = None  # the first pid traced: bwrap
        self.started = not sandbox  # the task's first exec was traced
        self.ended = not sandbox  # bwrap's own exit was traced: the trace is whole

    def feed(self, lines: Iterable[str]) -> Iterator[Access]:
        line = self.line if self._setup is None else self._sandbox_line
        for text in lines:
            self.lines += 1
            yield from line(text)

    def _sandbox_line(self, line: str) -> list[Access]:
        """One line of a sandbox's trace: bwrap's set-up dropped, the start and the end noted."""
        match = _LINE.match(line)
        if match is None:
            return []
        pid = int(match.group(1))
        setup = self._setup
        assert setup is not None
        if self.root is None:
            self.root = pid
        if pid == self.root:
            if " +++ exited with " in line or " +++ killed by " in line:
                self.ended = True
            self.line(line)  # cwd tracking only
            return []
        if not self.started:
            found = self.line(line)
            if "execve" in line and line.rstrip().endswith(" = 0"):
                self.started = True  # the sandbox's first command: from here on, the task
                setup.discard(pid)
                return found
            setup.add(pid)
            return []
        if pid in setup:
            return []
        return self.line(line)

    def line(self, line: str) -> list[Access]:
        fast = _OPENAT.match(line)
        if fast is not None:
            return self._openat(fast)
        match = _LINE.match(line.rstrip("\n"))
        if match is None:
            return []
        pid, text = int(match.group(1)), match.group(2)
        text = self._join(pid, text)
        if text is None:
            return []
        call = _split_call(pid, text)
        return [] if call is None else self._call(call)

    def _openat(self, m: re.Match) -> list[Access]:
        """The common line, in one match: `openat(AT_FDCWD<cwd>, "path", FLAGS[, mode]) = fd<real>|-1 E…`."""
        pid_text, cwd_hex, path_hex, flags, real_hex, errno = m.groups()
        if errno in _NOT_FINAL:
            return []
        pid, cwd = int(pid_text), unhex(cwd_hex)
        self._cwd[pid] = cwd
        path = _decode(path_hex)
        if path.startswith("/"):
            path = os.path.normpath(path)
        elif _plain(path):  # under a cwd the kernel printed (absolute, normal) it is already normal
            path = cwd + "/" + path if cwd != "/" else "/" + path
        else:
            path = os.path.normpath(os.path.join(cwd, path))
        real = _decode(real_hex) if real_hex is not None and errno is None else None
        return [Access(pid, _open_kind(flags), "openat", path, errno, real)]

    def _join(self, pid: int, text: str) -> str | None:
        """Join `<unfinished ...>` with its `<... resumed>` (pids interleave)."""
        if text.endswith(_UNFINISHED):
            self._pending[pid] = text[: -len(_UNFINISHED)]
            return None
        resumed = _RESUMED.match(text)
        if resumed:
            return self._pending.pop(pid, "") + resumed.group(1)
        return text

    def cwd(self, pid: int) -> str:
        return self._cwd.get(pid, self.initial_cwd)

    def _call(self, call: _Call) -> list[Access]:
        tokens = _tokens(call.args)
        for kind, value in tokens:
            if kind == "fd" and value.startswith("/") and call.args.startswith("AT_FDCWD<"):
                self._cwd[call.pid] = value  # -y decorates AT_FDCWD with the cwd: authoritative
                break
        handler = _HANDLERS.get(call.name)
        return handler(self, call, tokens) if handler else []

    # ------------------------------------------------------------ resolving

    def _at(self, call: _Call, dirfd: tuple[str, str] | None, path: str) -> str:
        """Resolve `path` against a decorated dirfd, or the pid's cwd (legacy calls)."""
        if path.startswith("/"):
            return os.path.normpath(path)
        base = (
            dirfd[1]
            if dirfd and dirfd[0] == "fd" and dirfd[1].startswith("/")
            else self.cwd(call.pid)
        )
        return os.path.normpath(os.path.join(base, path)) if path else base

    def _access(self, call: _Call, kind: str, path: str, real: str | None = None) -> Access:
        return Access(
            call.pid, kind, call.name, path, call.errno, real if call.errno is None else None
        )


def _plain(rel: str) -> bool:
    """A relative path with no `.`/`..` component, no empty one and no trailing slash: joining it
    to a normal directory needs no `normpath`, a cost paid per traced line (docs/optimizations.md
    #27)."""
    return bool(rel) and "/." not in "/" + rel and "//" not in rel and not rel.endswith("/")


def _strings(tokens: list[tuple[str, str]]) -> list[str]:
    return [value for kind, value in tokens if kind == "str"]


def _pairs(tokens: list[tuple[str, str]]) -> list[tuple[tuple[str, str] | None, str]]:
    """(dirfd, path) pairs for *at calls: each string with the fd token just before it."""
    out, last = [], None
    for token in tokens:
        if token[0] == "fd":
            last = token
        else:
            out.append((last, token[1]))
            last = None
    return out


@functools.lru_cache(
    maxsize=256
)  # a tool uses a handful of flag sets, `O_RDONLY|O_CLOEXEC` over and over
def _open_kind(args: str) -> str:
    """read, write, probe or list, from an open call's flags (or its whole argument text)."""
    flags = set(_FLAG.findall(args))
    if "O_RDWR" in flags and "O_TRUNC" not in flags:
        return "rdwr"  # written, and read too: `--verify` counts it as an input
    if flags & _WRITE_FLAGS:
        return "write"
    if "O_PATH" in flags:
        return "probe"
    return "list" if "O_DIRECTORY" in flags else "read"


def _on_open(p: TraceParser, call: _Call, tokens) -> list[Access]:
    pairs = _pairs(tokens)
    if not pairs:
        return []
    dirfd, path = pairs[0] if call.name != "open" else (None, pairs[0][1])
    kind = "write" if call.name == "creat" else _open_kind(call.args)
    return [p._access(call, kind, p._at(call, dirfd, path), call.ret_path)]


def _on_single(kind: str):
    """Calls whose first path (after an optional dirfd) is the one touched: mkdir, unlink, exec…"""

    def handle(p: TraceParser, call: _Call, tokens) -> list[Access]:
        pairs = _pairs(tokens)
        if not pairs:
            return []
        dirfd, path = pairs[0]
        if call.errno == "EEXIST" and call.name.startswith("mkdir"):
            return []  # the directory was there already: nothing was written
        return [
            p._access(call, kind, p._at(call, dirfd if call.name.endswith("at") else None, path))
        ]

    return handle


def _on_two(first_kind: str | None):
    """rename/link: the second path is written; rename also removes the first."""

    def handle(p: TraceParser, call: _Call, tokens) -> list[Access]:
        pairs = _pairs(tokens)
        if len(pairs) < 2:
            return []
        at = call.name.endswith(("at", "at2"))
        (fd1, old), (fd2, new) = pairs[0], pairs[1]
        out = [p._access(call, "write", p._at(call, fd2 if at else None, new))]
        if first_kind:
            out.insert(0, p._access(call, first_kind, p._at(call, fd1 if at else None, old)))
        return out

    return handle


def _on_symlink(p: TraceParser, call: _Call, tokens) -> list[Access]:
    pairs = _pairs(tokens)
    if len(pairs) < 2:
        return []
    dirfd, link = pairs[1]
    return [
        p._access(call, "write", p._at(call, dirfd if call.name == "symlinkat" else None, link))
    ]


def _on_lookup(p: TraceParser, call: _Call, tokens) -> list[Access]:
    """stat/access/readlink and their *at forms: only a refused one matters (a probe of a hidden file)."""
    if call.errno is None:
        return []
    pairs = _pairs(tokens)
    if not pairs or not pairs[0][1]:
        return []
    dirfd, path = pairs[0]
    return [p._access(call, "lookup", p._at(call, dirfd, path))]


def _on_name_to_handle(p: TraceParser, call: _Call, tokens) -> list[Access]:
    """A handle made of a path: remembered, so that opening by it later names the file."""
    handle = _HANDLE.search(call.args)
    pairs = _pairs(tokens)
    if call.errno is None and handle and pairs:
        dirfd, path = pairs[0]
        p._handles[handle.group(0)] = p._at(call, dirfd, path)
    return []


def _on_open_by_handle(p: TraceParser, call: _Call, tokens) -> list[Access]:
    """An open by a handle: the file its handle was made of, or an unnamed access under the mount
    (a handle made outside the trace: kept in a file, or by another process)."""
    if call.errno is not None:
        return []
    handle = _HANDLE.search(call.args)
    path = p._handles.get(handle.group(0)) if handle else None
    if path is not None:
        return [p._access(call, _open_kind(call.args), path, path)]
    mount = next((value for kind, value in tokens if kind == "fd"), "")
    return [p._access(call, "unnamed", mount or "?")]


def _on_chdir(p: TraceParser, call: _Call, tokens) -> list[Access]:
    if call.errno is None:
        if call.name == "fchdir":
            fds = [value for kind, value in tokens if kind == "fd" and value.startswith("/")]
            if fds:
                p._cwd[call.pid] = fds[0]
        else:
            strings = _strings(tokens)
            if strings:
                p._cwd[call.pid] = p._at(call, None, strings[0])
    return []


def _on_fork(p: TraceParser, call: _Call, tokens) -> list[Access]:
    if call.errno is None and call.ret.isdigit() and int(call.ret) > 0:
        p._cwd.setdefault(int(call.ret), p.cwd(call.pid))
    return []


_HANDLERS = {
    "open": _on_open, "openat": _on_open, "openat2": _on_open, "creat": _on_open,
    "truncate": _on_single("write"), "execve": _on_single("exec"), "execveat": _on_single("exec"),
    "mkdir": _on_single("write"), "mkdirat": _on_single("write"),
    "rmdir": _on_single("write"), "unlink": _on_single("write"), "unlinkat": _on_single("write"),
    "rename": _on_two("write"), "renameat": _on_two("write"), "renameat2": _on_two("write"),
    "link": _on_two(None), "linkat": _on_two(None),
    "symlink": _on_symlink, "symlinkat": _on_symlink,
    "chdir": _on_chdir, "fchdir": _on_chdir,
    "stat": _on_lookup, "lstat": _on_lookup, "newfstatat": _on_lookup, "statx": _on_lookup,
    "access": _on_lookup, "faccessat": _on_lookup, "faccessat2": _on_lookup,
    "readlink": _on_lookup, "readlinkat": _on_lookup,
    "clone": _on_fork, "clone3": _on_fork, "fork": _on_fork, "vfork": _on_fork,
    "name_to_handle_at": _on_name_to_handle, "open_by_handle_at": _on_open_by_handle,
}  # fmt: skip


def parse(lines: Iterable[str], cwd: str) -> list[Access]:
    """Parse a whole trace; `cwd` is the task's starting directory."""
    return list(TraceParser(cwd).feed(lines))
