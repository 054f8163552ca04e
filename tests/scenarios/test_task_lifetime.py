"""Tasks die with vx: a SIGKILLed vx leaves no task running, its grandchildren included.
Nothing a task started outlives it, also a process that left its process group (`setsid`):
with a cgroup per task where cgroup v2 is writable, else with vx as a child subreaper."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from subprocess import DEVNULL

import pytest
from support.commands import needs
from support.processes import end, kill_all, running, start_vx, wait_for
from support.store import assert_saved_as_left
from support.workspace import SRC, build_task, npm_workspace, one_build, vx_env

HANG = (
    "node -e \"require('child_process').spawn(process.execPath,['-e',"
    '\'require(\\"fs\\").writeFileSync(\\"grandchild.pid\\",String(process.pid));setInterval(()=>{},1000)\'],'
    "{stdio:'ignore'});require('fs').writeFileSync('child.pid',String(process.pid));setInterval(()=>{},1000)\""
)


def task_cgroups_in(run_dir: str) -> list[str]:
    """The task cgroups still under a run's cgroup (none when it is gone)."""
    if not os.path.isdir(run_dir):
        return []
    return [d for d in os.listdir(run_dir) if os.path.isdir(f"{run_dir}/{d}")]


@pytest.mark.parametrize("way", ["group", "members"])
def test_a_sigkill_of_vx_ends_every_task_and_its_children(repo, way):
    """By the process-group flag of pidfd_send_signal, and member by member (before Linux 6.9)."""
    env = vx_env({"VX_TEST_WARDEN": way})
    repo.write(
        npm_workspace(
            {name: {"tasks": {"serve": {"exec": {"command": HANG}}}} for name in ("a", "b")}
        )
    ).commit()
    vx = start_vx("run", "serve", "--all", cwd=repo.root, env=env, stdout=DEVNULL, stderr=DEVNULL)
    pids = []
    try:
        for name in ("a", "b"):
            for kind in ("child", "grandchild"):
                path = repo.root / f"packages/{name}/{kind}.pid"
                wait_for(
                    lambda path=path: path.exists() and path.read_text(), f"{path.name} of {name}"
                )
                pids.append(int(path.read_text()))
        assert all(running(p) for p in pids)
        vx.send_signal(signal.SIGKILL)
        vx.wait()
        for pid in pids:
            wait_for(
                lambda pid=pid: not running(pid), f"task process {pid} to end after vx was killed"
            )
    finally:
        kill_all(pids)


# ---------------------------------------------------------------- detached descendants

# A process that leaves the task's session and process group, then lives on: its pid in detached.pid
# (at the workspace root) before the task goes on, so it surely started.
DETACH = (
    "setsid sh -c 'echo $$ > ../../detached.pid; exec sleep 1000' & "
    "while [ ! -s ../../detached.pid ]; do sleep 0.01; done"
)


def cgroup_v2_writable() -> bool:
    """Whether this process may make a cgroup below its own in a v2 hierarchy (as vx would)."""
    try:
        own = next(l[3:].strip() for l in open("/proc/self/cgroup") if l.startswith("0::"))
    except (OSError, StopIteration):
        return False
    for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if os.path.exists(f"{mount}/cgroup.controllers"):
            probe = f"{mount}{own.rstrip('/')}/vx-test-{os.getpid()}"
            try:
                os.mkdir(probe)
                os.rmdir(probe)
            except OSError:
                return False
            return os.access(f"{mount}{own.rstrip('/')}/cgroup.procs", os.W_OK)
    return False


@pytest.fixture(params=["cgroup", "subreaper"])
def tracking(request) -> dict:
    """Run vx both ways: a cgroup per task (where this machine allows it), and the subreaper."""
    if request.param == "cgroup" and not cgroup_v2_writable():
        pytest.skip("no writable cgroup v2 hierarchy here")
    return {"VX_TEST_TRACKING": request.param, "VX_KILL_GRACE_MS": "200"}


def detached_pid(repo) -> int:
    path = repo.root / "detached.pid"
    assert path.exists() and path.read_text().strip(), "the task never started its detached process"
    return int(path.read_text())


def in_own_cgroup(pid: int) -> bool:
    with open(f"/proc/{pid}/cgroup") as f:
        return any(l.startswith("0::") and "/vx-" in l for l in f)


def one_task(repo, task: dict) -> None:
    repo.write(npm_workspace({"app": {"tasks": {"serve": task}}})).commit()


def test_a_setsid_grandchild_is_gone_when_vx_returns(repo, tracking):
    one_task(repo, {"exec": {"command": DETACH}})
    res = repo.vx("run", "serve", "--all", env=tracking)
    assert res.code == 0, res.err
    pid = detached_pid(repo)
    try:
        assert not running(pid), "a detached process the task started outlived the run"
    finally:
        kill_all([pid])


def test_a_setsid_grandchild_is_gone_after_a_timeout(repo, tracking):
    one_task(repo, {"exec": {"command": DETACH + "; sleep 1000", "timeout": 3000}})
    res = repo.vx("run", "serve", "--all", env=tracking)
    pid = detached_pid(repo)
    try:
        assert res.code == 1 and res.task("app#serve").get("timedOut") is True, res.err
        assert not running(pid), "a detached process outlived its task's timeout"
    finally:
        kill_all([pid])


def test_a_setsid_grandchild_is_gone_after_ctrl_c(repo, tracking):
    one_task(repo, {"exec": {"command": DETACH + "; echo ready > ../../ready; sleep 1000"}})
    vx = start_vx("run", "serve", "--all", cwd=repo.root, env=vx_env(tracking), stdout=DEVNULL)
    pid = 0
    try:
        wait_for((repo.root / "ready").exists, "the task to start its detached process")
        pid = detached_pid(repo)
        assert running(pid)
        if tracking["VX_TEST_TRACKING"] == "cgroup":
            assert in_own_cgroup(pid), "the task did not run in a cgroup of its own"
        vx.send_signal(signal.SIGINT)
        _, err = vx.communicate(timeout=60)
        assert vx.returncode == 130, err
        assert not running(pid), "a detached process survived Ctrl-C"
        assert "Traceback" not in err
    finally:
        end(vx)
        kill_all([pid])


def test_a_detached_writer_is_stopped_before_the_save(repo, tracking):
    """A cached task leaves a writer in a session of its own: one that writes an output on SIGTERM,
    one that waits for a gate the test opens only after vx returned. vx stops both before it reads
    the outputs, so the entry is exactly what is on disk and nothing lands after the save."""
    cmd = (
        "mkdir -p dist && echo early > dist/a.txt && "
        'setsid sh -c \'trap "echo late > dist/late.txt; exit 0" TERM; '
        "echo $$ > ../../term.pid; while :; do sleep 0.05; done' >/dev/null 2>&1 & "
        "setsid sh -c 'echo $$ > ../../detached.pid; "
        "while [ ! -e ../../gate ]; do sleep 0.01; done; echo gated > dist/gated.txt; "
        "echo done > ../../gated.done' >/dev/null 2>&1 & "
        "while [ ! -s ../../detached.pid ] || [ ! -s ../../term.pid ]; do sleep 0.01; done"
    )
    repo.write(one_build(cmd)).commit()
    res = repo.vx("run", "build", "--all", env=tracking)
    pids = [detached_pid(repo), int((repo.root / "term.pid").read_text())]
    try:
        assert res.code == 0, res.err
        assert not any(running(p) for p in pids), "a detached writer outlived the task"
        assert "app#build: processes it started in the background were still running" in res.err
        (repo.root / "gate").write_text("")  # a writer still alive would now write gated.txt
        assert_saved_as_left(repo)
        assert not (repo.root / "gated.done").exists()
    finally:
        kill_all(pids)


# ---------------------------------------------------------------- a run that fails as it starts

# A task that would outlive a plain SIGTERM: its shell and a child in a session of its own ignore it.
STUBBORN = "trap '' TERM; setsid sh -c 'trap \"\" TERM; exec sleep 1000' & exec sleep 1001"


def processes_in(directory) -> list[int]:
    """The running processes whose working directory is `directory` or below (a task's are)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and running(int(entry)):
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
            except OSError:
                continue
            if cwd == str(directory) or cwd.startswith(f"{directory}/"):
                found.append(int(entry))
    return found


def pin(path) -> None:
    """Make `path` impossible to delete for this user (root: the immutable flag)."""
    if os.geteuid() != 0:
        os.chmod(path.parent, 0o555)
        return
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip("cannot make a file undeletable here (chattr +i refused)")


def unpin(path) -> None:
    if os.geteuid() != 0:
        os.chmod(path.parent, 0o755)
    else:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False)


def vx_cgroup_parent() -> str:
    own = next(l[3:].strip() for l in open("/proc/self/cgroup") if l.startswith("0::"))
    mount = next(
        m
        for m in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified")
        if os.path.exists(f"{m}/cgroup.controllers")
    )
    return f"{mount}{own.rstrip('/')}"


@dataclass
class Ended:
    """A run of vx to its end: its exit code and output, the processes left in a's project the
    moment it ended, its run's cgroup and the task cgroups still under that."""

    code: int
    out: str
    err: str
    left: list[int]
    run_dir: str
    tasks_left: list[str]


def failed_start(repo, tracking: dict, *argv: str) -> Ended:
    """Run `python ARGV` (vx) in `repo` to its end, then SIGKILL whatever a's task left."""
    task_dir = repo.root / "packages/a"
    vx = subprocess.Popen(
        [sys.executable, *argv],
        cwd=repo.root,
        env=vx_env(tracking),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        out, err = vx.communicate(timeout=120)
        left = processes_in(task_dir)  # at once: the warden would stop them later
        run_dir = f"{vx_cgroup_parent()}/vx-{vx.pid}"
        return Ended(vx.returncode, out, err, left, run_dir, task_cgroups_in(run_dir))
    finally:
        end(vx)
        kill_all(processes_in(task_dir))


@pytest.mark.feature("EX-11")
def test_first_wave_task_is_stopped_and_released_when_the_run_fails_as_it_starts(repo, tracking):
    """The first wave starts a's task (first in the walk's order), then cannot wipe b's stale
    output: the run fails before the walk adopts anything. vx kills what a's task started (its
    setsid child too) and drops a's cgroup before it exits, rather than leaving both to the
    warden, which would also keep a's group number to signal."""
    repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"build": {"exec": {"command": STUBBORN}}}},
                "b": {
                    "tasks": {"build": build_task(deps=())},
                    "files": {"src/b.js": "B;"},
                },
            }
        )
    ).commit()
    stale = repo.root / "packages/b/dist/out.js"
    stale.parent.mkdir()
    stale.write_text("stale")
    pin(stale)
    try:
        run = failed_start(
            repo, tracking, "-m", "vx", "run", "build", "--all", "--concurrency", "2"
        )
    finally:
        unpin(stale)
    assert run.code != 0 and "cannot remove output" in run.out + run.err, run.out + run.err
    assert "Traceback" not in run.err
    assert not run.left, f"processes of a's task outlived vx: {run.left}"
    if tracking["VX_TEST_TRACKING"] == "cgroup":
        assert not run.tasks_left, f"task cgroups of the run outlived vx: {run.tasks_left}"
        wait_for(lambda: not os.path.exists(run.run_dir), "the run's cgroup to go")


# The walk's set-up failing after it adopted the first wave (here: installing its signal handlers,
# which refuses off the main thread); any exception between the adoption and the walk is alike.
FAULT_IN_WALK_SETUP = """
import sys
import vx.engine.signals

def refused(*args):
    raise RuntimeError("set_wakeup_fd only works in main thread of the main interpreter")

vx.engine.signals.install = refused
sys.argv = ["vx", *sys.argv[1:]]
from vx.__main__ import entry
entry()
"""


@pytest.mark.feature("EX-11")
def test_first_wave_task_is_stopped_when_the_walk_fails_after_adopting_it(repo, tracking):
    """The walk takes the first wave's task into its process table, then fails before the `try`
    whose end shuts the table down. Before, nothing stopped that task — the caller's stop covers
    only what the walk never adopted — and it ran on until the warden noticed vx was gone. Now
    vx kills it, its setsid child too, and drops its cgroup before it exits."""
    repo.write(npm_workspace({"a": {"tasks": {"build": {"exec": {"command": STUBBORN}}}}})).commit()
    run = failed_start(repo, tracking, "-c", FAULT_IN_WALK_SETUP, "run", "build", "--all")
    assert run.code != 0 and "set_wakeup_fd" in run.out + run.err, run.out + run.err
    assert not run.left, f"processes of a's task outlived vx: {run.left}"
    if tracking["VX_TEST_TRACKING"] == "cgroup":
        assert not run.tasks_left, f"task cgroups of the run outlived vx: {run.tasks_left}"


# ---------------------------------------------------------------- a hostile task in the sandbox

# What an unprivileged task can try against the run's teardown: kill the warden — by the pid the
# test hands it (vx's, on the host) and by every process it can see named for it —
# write itself into every cgroup it can see (its run's and vx's own above it), and leave a
# session of its own running. (Nothing broader, such as `kill -9 -1`: should the sandbox ever not
# apply, this runs with the suite's rights.)
HOSTILE = (
    "until [ -s in/target ]; do sleep 0.05; done; kill -9 $(cat in/target) 2>/dev/null; "
    'echo "kill $?" >out/report; '
    "for p in /proc/[0-9]*; do case $(cat $p/comm 2>/dev/null) in "
    "*warden*) kill -9 ${p#/proc/} 2>/dev/null;; esac; done; n=0; moved=0; "
    "for f in $(find /sys/fs/cgroup -name cgroup.procs 2>/dev/null); do "
    'n=$((n+1)); echo $$ 2>/dev/null >"$f" && moved=$((moved+1)); done; '
    'echo "cgroups $n moved $moved" >>out/report; cat /proc/self/cgroup >>out/report; '
    "setsid sh -c 'exec sleep 1000' & touch out/attempted; exec sleep 1001"
)


def warden_of(vx_pid: int) -> list[int]:
    """The run's warden: the fork of vx named `vx-warden`, in a session of its own."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and running(int(entry)):
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rpartition(")")[2].split()[1])
                with open(f"/proc/{entry}/comm") as f:
                    comm = f.read().strip()
            except (OSError, ValueError, IndexError):
                continue
            if ppid == vx_pid and comm == "vx-warden":
                found.append(int(entry))
    return found


@pytest.mark.feature("SB-13")
@needs("bwrap", "strace")
def test_a_sandboxed_task_cannot_kill_the_warden_or_leave_its_cgroup(repo, tracking):
    """A sandboxed task sends SIGKILL to the warden (its host pid, handed to it, and every process
    it sees that names it), writes its pid into every `cgroup.procs` under /sys/fs/cgroup, starts
    a `setsid` sleeper and waits. Its pid namespace holds no process of vx's and the cgroup tree
    is read-only there: the warden lives on, every
    process of the task stays in the task's own cgroup, and once vx is SIGKILLed the warden ends
    them all and removes the run's cgroups. Outside a sandbox a task has vx's rights and can do
    both (docs/caching.md)."""
    task = {
        "exec": {"command": HOSTILE, "sandbox": {"allow": {"read": ["in/**"], "write": ["out/"]}}}
    }
    repo.write(npm_workspace({"a": {"tasks": {"build": task}, "files": {"in/.keep": ""}}})).commit()
    task_dir = repo.root / "packages/a"
    vx = start_vx("run", "build", "--all", cwd=repo.root, env=vx_env(tracking), stdout=DEVNULL)
    try:
        wait_for(lambda: warden_of(vx.pid) or vx.poll() is not None, "the warden to start")
        [warden] = warden_of(vx.pid)
        (task_dir / "in/target.tmp").write_text(f"{warden}\n")
        (task_dir / "in/target.tmp").rename(task_dir / "in/target")
        wait_for(
            lambda: (task_dir / "out/attempted").exists() or vx.poll() is not None, "the attack"
        )
        assert vx.poll() is None, (
            f"vx ended before the task made its attempts: {vx.communicate()[1]}"
        )
        report = (task_dir / "out/report").read_text()
        assert running(warden), f"the warden is gone:\n{report}"
        mine = processes_in(task_dir)
        assert mine, "no process of the task found"
        if tracking["VX_TEST_TRACKING"] == "cgroup":
            tried = report.splitlines()[1].split()  # "cgroups N moved M"
            assert int(tried[1]) > 0 and tried[3] == "0", report  # it saw cgroups, moved to none
            for pid in mine:
                with open(f"/proc/{pid}/cgroup") as f:
                    assert f"/vx-{vx.pid}/t" in f.read(), (pid, report)
        vx.kill()
        vx.wait()
        wait_for(lambda: not processes_in(task_dir), "the warden to end the task's processes")
        if tracking["VX_TEST_TRACKING"] == "cgroup":
            run_dir = f"{vx_cgroup_parent()}/vx-{vx.pid}"
            wait_for(lambda: not os.path.exists(run_dir), "the run's cgroups to go")
    finally:
        end(vx)
        kill_all(processes_in(task_dir))


@pytest.mark.feature("SB-13")
@needs("bwrap", "strace")
def test_a_sigkilled_vx_leaves_no_sandbox_or_proxy_directory(repo, tmp_path):
    """A sandboxed run keeps its task dirs (TMPDIR, strace's trace) and its network proxy's
    sockets in temp directories of its own, which vx removes as the run ends. SIGKILLed, vx
    cannot: the warden removes them once the task is ended (each suite run left two behind), and
    ends the proxy's bridge into the sandbox's network namespace (a socat that lived on)."""
    temp = tmp_path / "temp"
    temp.mkdir()
    sandbox = {"allow": {"read": ["in/**"], "write": ["out/"], "network": ["localhost"]}}
    task = {"exec": {"command": "echo started >out/started; exec sleep 1000", "sandbox": sandbox}}
    repo.write(npm_workspace({"a": {"tasks": {"build": task}, "files": {"in/.keep": ""}}})).commit()
    started = repo.root / "packages/a/out/started"

    def made() -> list[str]:  # the run lock's file (vx-run-*.flock) is kept by design
        return sorted(p.name for p in temp.iterdir() if p.name.startswith(("vx-sandbox", "vx-net")))

    vx = start_vx(
        "run", "build", "--all", cwd=repo.root, env=vx_env({"TMPDIR": str(temp)}), stdout=DEVNULL
    )
    try:
        wait_for(lambda: started.exists() or vx.poll() is not None, "the task to start")
        assert vx.poll() is None, f"vx ended before the task started: {vx.communicate()[1]}"
        assert [name.rpartition("-")[0] for name in made()] == ["vx-net", "vx-sandbox"], made()
        vx.kill()
        vx.wait()
        wait_for(lambda: not made(), "the warden to remove the run's temp dirs")
        wait_for(lambda: not naming(str(temp)), "the network bridge (socat) to end")
    finally:
        end(vx)
        kill_all(naming(str(temp)))


def naming(text: str) -> list[int]:
    """The processes whose command line holds `text`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if text.encode() in f.read() and running(int(entry)):
                        found.append(int(entry))
            except (FileNotFoundError, ProcessLookupError):
                pass
    return found


# ---------------------------------------------------------------- the warden: strangers, its death

# Runs as PID 1 of a fresh pid namespace, where pids are handed out in order and
# /proc/sys/kernel/ns_last_pid says which comes next. "vx" (a child running spawn.start) starts a
# task that exits, reaps it and, as a vx killed before it could tell the warden, never releases
# its group. The group's number is then given to a stranger in a session of its own, and "vx" is
# SIGKILLed: the warden must not signal the stranger. Prints "spared" or "signalled".
REUSE_HARNESS = r"""
import os, signal, subprocess, sys
VX = '''
import os, sys
from vx.proc import spawn
popen = spawn.start("exit 0", ".", dict(os.environ))
popen.wait()
os.write(1, b"%d\\n" % popen.pid)
os.read(0, 1)
'''
hold_r, hold_w = os.pipe()
vx = subprocess.Popen([sys.executable, "-c", VX], stdin=hold_r, stdout=subprocess.PIPE)
task = int(vx.stdout.readline())
with open("/proc/sys/kernel/ns_last_pid", "w") as f:
    f.write(str(task - 1))
stranger = subprocess.Popen(["sleep", "1000"], start_new_session=True)
assert stranger.pid == task == os.getpgid(stranger.pid), (stranger.pid, task)
vx.kill()
vx.wait()
while True:  # PID 1 reaps every orphan: the warden's end is the event waited for
    pid, status = os.waitpid(-1, 0)
    if pid == stranger.pid:
        print("signalled", os.waitstatus_to_exitcode(status))
        break
    if pid != vx.pid:
        print("spared" if stranger.poll() is None else "signalled")
        stranger.kill()
        break
"""


@pytest.mark.parametrize("way", ["group", "members"])
@needs("unshare")
def test_the_warden_never_signals_a_group_that_took_a_dead_tasks_number(tmp_path, way):
    """The number of a task's group, dead and reaped before vx could tell the warden, goes to a
    stranger's group (made certain in a pid namespace); vx is then SIGKILLed. Before, the warden
    sent SIGTERM to the stranger's group, which has the number; now it signals through a pidfd,
    which names the dead group alone — with Linux 6.9's process-group flag, and member by member
    as before it (`members`)."""
    env = dict(os.environ, PYTHONPATH=SRC, VX_TEST_TRACKING="subreaper")
    if way == "members":
        env["VX_TEST_WARDEN"] = "members"
    unshare = ["unshare", "--pid", "--fork", "--mount-proc"]
    if os.geteuid() != 0:
        unshare[1:1] = ["--user", "--map-root-user"]
    res = subprocess.run(
        [*unshare, sys.executable, "-c", REUSE_HARNESS],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if res.returncode != 0 and "unshare" in res.stderr and "Traceback" not in res.stderr:
        pytest.skip(f"no pid namespace here: {res.stderr.strip()}")
    assert res.stdout.strip() == "spared", res.stdout + res.stderr


# Kills the warden the way a task could (its name in /proc), says whom it killed, keeps a child.
KILLS_WARDEN = (
    'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = vx-warden ] && '
    "kill -9 ${p#/proc/} && echo ${p#/proc/} >>killed; done; "
    "sleep 1000 & echo $! >child.pid; wait"
)


@pytest.mark.parametrize("ending", ["SIGKILL", "SIGINT"])
def test_a_task_that_kills_the_warden_still_ends_with_vx(repo, tracking, ending):
    """A task kills the warden (found by its name in /proc) and keeps a child running. vx starts
    a new warden with the task's group; vx is then SIGKILLed, or interrupted, and the task and its
    child end all the same. Before, the warden stayed dead and a SIGKILLed vx left both running."""
    one_task(repo, {"exec": {"command": KILLS_WARDEN}})
    task_dir = repo.root / "packages/app"
    vx = start_vx("run", "serve", "--all", cwd=repo.root, env=vx_env(tracking), stdout=DEVNULL)
    try:
        wait_for(lambda: (task_dir / "child.pid").exists() or vx.poll() is not None, "the task")
        assert vx.poll() is None, vx.communicate()[1]
        killed = {int(line) for line in (task_dir / "killed").read_text().split()}
        assert killed and not any(running(pid) for pid in killed), killed
        wait_for(lambda: set(warden_of(vx.pid)) - killed, "a new warden")
        left = processes_in(task_dir)
        assert len(left) >= 2, left  # the task's shell and its child
        if ending == "SIGKILL":
            vx.kill()
        else:
            vx.send_signal(signal.SIGINT)
        code = vx.wait(timeout=120)
        assert code == (-9 if ending == "SIGKILL" else 130), vx.stderr.read()
        wait_for(lambda: not processes_in(task_dir), "the task's processes to end")
    finally:
        end(vx)
        kill_all(processes_in(task_dir))
