"""Find every process a task started, also one that left the task's process group on purpose
(`setsid`, a daemon's double fork), so that vx can stop it when the task ends.

Two ways, chosen once, at the first task start (never on a run that starts no task):

- **A cgroup per task** where cgroup v2 is mounted and vx may create cgroups below its own:
  `<vx's cgroup>/vx-<pid>/t<n>`. The task's shell moves itself in (`echo $$ >cgroup.procs`)
  before it runs a word of the command, so whatever it forks is inside; a process can leave a
  cgroup only by a write that needs the same rights. `cgroup.kill` (Linux 5.14) kills the lot
  at once, forks in flight included; before it, the cgroup is frozen and each member killed.
- **vx as a child subreaper** otherwise (`PR_SET_CHILD_SUBREAPER`): an orphan is reparented to vx
  instead of to PID 1, so it can still be found. A task's processes are then its shell's
  descendants, its process group, and vx's orphaned children whose environment names the task
  (`VX_RUN_TASK`, which every task gets), with their descendants. An orphan that clears its
  environment is out of reach there.

Why the shell moves itself: Popen's fast path (vfork) takes no hook that runs before exec, and
moving the child from vx after Popen returns races with its first fork. This module needs no
event loop: the first wave of a run starts before asyncio is loaded.
"""

from __future__ import annotations

import os
import signal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

CGROUP = "cgroup"
SUBREAPER = "subreaper"
NONE = "none"

_mode = ""  # "" until the first task start
_run_dir = ""  # the run's cgroup, parent of one cgroup per task
_seq = 0
_cgroups: dict[int, str] = {}  # a task shell's pid -> its cgroup directory
_marks: dict[int, str] = {}  # a task shell's pid -> its VX_RUN_TASK (subreaper mode)
_run_marks: set[str] = set()  # every mark of the run, for its end (subreaper mode)
_orphans: set[int] = set()  # orphans seen alive: ours to reap once they die (subreaper mode)
_V2_MOUNTS = ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")  # unified: the v1/v2 hybrid layout


def mode() -> str:
    """How descendants are tracked: CGROUP, SUBREAPER or NONE; probed on the first call."""
    global _mode, _run_dir
    if not _mode:
        forced = os.environ.get("VX_TEST_TRACKING", "")  # the tests run both ways on one machine
        _run_dir = "" if forced == SUBREAPER else _make_run_cgroup()
        _mode = CGROUP if _run_dir else SUBREAPER if _become_subreaper() else NONE
    return _mode


def run_cgroup() -> str:
    """The run's cgroup directory ("" without cgroups), for the warden to kill when vx dies."""
    mode()
    return _run_dir


def new_cgroup() -> str:
    """Make the cgroup of a task about to start; "" without cgroups."""
    global _seq
    if mode() != CGROUP:
        return ""
    _seq += 1
    path = f"{_run_dir}/t{_seq}"
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    except OSError:
        return ""
    return path


def entry_words(path: str) -> str:
    """The shell words, put before a task's command, that move the shell into its cgroup.

    `|| :` keeps the command's `$?` and runs the task anyway should the move fail; the task is
    then tracked through its process group only, as without cgroups.
    """
    return f"echo $$ 2>/dev/null >{_quote(path + '/cgroup.procs')} || :; " if path else ""


def bind(pid: int, path: str, env: Mapping[str, str]) -> None:
    """Record the task process just started: its cgroup, or (subreaper mode) its task's mark."""
    if path:
        _cgroups[pid] = path
    elif _mode == SUBREAPER and env.get("VX_RUN_TASK"):
        _marks[pid] = env["VX_RUN_TASK"]
        _run_marks.add(env["VX_RUN_TASK"])


def forget(pid: int, path: str = "") -> None:
    """The task whose shell was `pid` is over and nothing of it runs (or it never started, and
    `path` is the cgroup made for it): drop its cgroup. A mark stays for the run: a subreaper
    cannot cheaply tell whether the task left orphans, so a cached task's settling asks later."""
    path = _cgroups.pop(pid, path)
    if path:
        _remove(path)


def alive(pid: int, thorough: bool = True) -> bool:
    """Whether a process the task (shell `pid`) started, outside its process group, still runs.

    With a cgroup this is one read. A subreaper has to look through /proc, so the check after
    every task's exit (`thorough=False`) leaves that to the end of the run (orphans()); a cached
    task's settling, whose outputs are read next, and the stop paths ask in full.
    """
    path = _cgroups.get(pid)
    if path is not None:
        try:
            with open(path + "/cgroup.events", "rb") as file:
                return b"populated 1" in file.read()
        except OSError:
            return False
    return thorough and bool(_marks.get(pid)) and bool(_strays({_marks[pid]}, pid))


def orphans() -> list[int]:
    """Subreaper mode: every process any task of the run left outside its group that still runs
    (one look through /proc, at the end of the run; none when nothing was orphaned)."""
    return _strays(_run_marks, 0) if _run_marks else []


def signal_orphans(sig: int) -> None:
    for member in orphans():
        _kill(member, sig)


def signal_all(pid: int, sig: int) -> None:
    """Send `sig` to the processes of the task (shell `pid`) that left its process group; SIGKILL
    to all of them. The caller signals the group itself: a polite signal arrives once."""
    path = _cgroups.get(pid)
    if path is not None:
        if sig == signal.SIGKILL and _write(path + "/cgroup.kill", b"1"):
            return
        frozen = sig == signal.SIGKILL and _write(path + "/cgroup.freeze", b"1")
        for member in _members(path):  # no member can fork meanwhile when frozen
            if sig == signal.SIGKILL or _pgid(member) != pid:
                _kill(member, sig)
        if frozen:
            _write(path + "/cgroup.freeze", b"0")  # a frozen process still dies of SIGKILL
        return
    if _marks.get(pid):
        for member in _strays({_marks[pid]}, pid):
            if sig == signal.SIGKILL or _pgid(member) != pid:
                _kill(member, sig)


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return 0


def _members(path: str) -> list[int]:
    pids = []
    for directory, _, _ in os.walk(path):  # a nested vx's cgroups sit below
        try:
            with open(directory + "/cgroup.procs", "rb") as file:
                pids += [int(word) for word in file.read().split()]
        except OSError:
            pass
    return pids


def _strays(marks: set[str], pid: int) -> list[int]:
    """Subreaper mode: the running processes that descend from the task shell `pid` (0: none),
    or from vx's orphaned children whose mark is in `marks`. Orphans seen here are reaped once
    dead, so that no zombie stays vx's child."""
    if pid == 0 or not _running(pid):
        if _orphaned(marks) is False:
            return []  # vx's children, listed by the kernel, hold no orphan of these tasks
    table = _process_table()
    me = os.getpid()
    shells = set(_marks) | set(_cgroups)
    roots = {pid} if pid in table else set()
    for other, (ppid, _, _) in table.items():
        if ppid == me and other not in shells and _mark_of(other) in marks:
            roots.add(other)
            _orphans.add(other)
    children: dict[int, list[int]] = {}
    for other, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(other)
    found, todo = set(), list(roots)
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo += children.get(current, ())
    found.discard(pid)  # the shell itself is the executor's
    _reap_orphans()
    return [p for p in found if table[p][2] not in "ZX"]


def _orphaned(marks: set[str]) -> bool | None:
    """Whether one of vx's children carries a mark in `marks` and is no task shell; None when the
    kernel does not list children (CONFIG_PROC_CHILDREN), and only /proc as a whole can tell."""
    kids = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/children", "rb") as file:
                kids += [int(word) for word in file.read().split()]
    except FileNotFoundError:
        return None
    except OSError:
        pass
    shells = set(_marks) | set(_cgroups)
    return any(kid not in shells and _mark_of(kid) in marks for kid in kids)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def _reap_orphans() -> None:
    for orphan in list(_orphans):
        try:
            got, _ = os.waitpid(orphan, os.WNOHANG)
        except ChildProcessError:
            _orphans.discard(orphan)
            continue
        if got:
            _orphans.discard(orphan)


def _process_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (ppid, pgid, state) for every process in /proc."""
    table: dict[int, tuple[int, int, str]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                stat = file.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) "
        if len(fields) > 3:
            table[int(entry)] = (int(fields[1]), int(fields[2]), fields[0].decode())
    return table


def _mark_of(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            environ = file.read()
    except OSError:
        return None
    for entry in environ.split(b"\0"):
        if entry.startswith(b"VX_RUN_TASK="):
            return entry[len(b"VX_RUN_TASK=") :].decode(errors="replace")
    return None


def _make_run_cgroup() -> str:
    """Create `<vx's own v2 cgroup>/vx-<pid>`; "" where there is no v2 hierarchy or no right."""
    try:
        with open("/proc/self/cgroup") as file:
            own = next((line[3:].strip() for line in file if line.startswith("0::")), None)
    except OSError:
        return ""
    mount = next((m for m in _V2_MOUNTS if os.path.exists(m + "/cgroup.controllers")), None)
    if own is None or mount is None or ".." in own or not own.startswith("/"):
        return ""  # outside our cgroup namespace's view, or no v2 hierarchy
    parent = mount + own.rstrip("/")
    if not os.access(parent + "/cgroup.procs", os.W_OK):
        return ""  # the shell could not leave vx's cgroup for its own
    path = f"{parent}/vx-{os.getpid()}"
    try:
        os.mkdir(path)
    except FileExistsError:
        pass  # a dead run's with the same pid: its tasks are gone (its warden killed them)
    except OSError:
        return ""
    return path


def _become_subreaper() -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False  # not Linux


def _remove(path: str) -> None:
    """rmdir the cgroup and what a nested vx left below it; a populated one stays."""
    for directory, _, _ in os.walk(path, topdown=False):
        try:
            os.rmdir(directory)
        except OSError:
            pass


def _write(path: str, data: bytes) -> bool:
    try:
        with open(path, "wb", buffering=0) as file:
            file.write(data)
    except OSError:
        return False
    return True


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
