"""`vx watch` (CLI-03, CLI-70..CLI-73): real vx in its own process group, real file edits, real git."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.commands import needs
from support.workspace import SRC, build_task, npm_workspace, vx_env


class Watcher:
    """`vx watch …` started as a terminal would (its own process group, so Ctrl-C reaches the
    cycle too), its stderr collected as it comes."""

    def __init__(self, ws, *args: str, env: dict | None = None, prefix: tuple[str, ...] = ()):
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "vx", "watch", *args],
            cwd=ws.root,
            env=vx_env(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.err = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.err += line

    def wait_for(self, text: str, count: int = 1, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.err.count(text) < count:
            assert time.monotonic() < deadline, f"no {count}× {text!r} in:\n{self.err}"
            assert self.proc.poll() is None, f"vx watch ended ({self.proc.returncode}):\n{self.err}"
            time.sleep(0.05)

    def ctrl_c(self) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)
        code = self.proc.wait(timeout=30)
        # The last lines may still be in the pipe when the process is reaped: read them all
        # (the reader ends at EOF, once every process holding the pipe is gone).
        self._reader.join(timeout=30)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def built(ws, name: str) -> str | None:
    """What a's build wrote, or None while a cycle has it wiped (LC-08)."""
    try:
        return (ws.root / f"packages/{name}/dist/out.js").read_text()
    except FileNotFoundError:
        return None


@pytest.fixture
def ws(repo):
    ws = repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}},
                "b": {"deps": ["a"], "tasks": {"build": build_task()}, "files": {"src/b.js": "B;"}},
            }
        )
    ).commit()
    # The polling watcher compares mtimes to the second: an edit in the same second as the file's
    # last write goes unseen (measured; inotify has no such limit). On a quick run the setup's
    # writes and a test's edit shared a second now and then; the setup's are made older.
    old = time.time() - 10
    for path in (ws.root / "packages").rglob("*"):
        os.utime(path, (old, old), follow_symlinks=False)
    return ws


@pytest.fixture
def watch(ws):
    started = []

    def start(*args, env=None):
        started.append(Watcher(ws, *args, env=env))
        return started[-1]

    yield start
    for w in started:
        w.close()


# The watch limit lowered to one watch inside a user namespace of its own (the limit is per user
# namespace): inotify fails as on a machine whose fs.inotify.max_user_watches is exhausted.
AT_WATCH_LIMIT = (
    "unshare",
    "--user",
    "--map-root-user",
    "sh",
    "-c",
    'echo 1 > /proc/sys/user/max_inotify_watches && exec "$@"',
    "sh",
)


@pytest.mark.feature("CLI-72")
@needs("unshare")
def test_a_watcher_at_the_watch_limit_falls_back_to_polling_and_sees_edits(ws):
    """Before, `vx watch` ended with an internal error (watchfiles' OSError) when inotify was out of
    watches; now it says so once, polls, and an edit still runs again."""
    w = Watcher(ws, "build", "--all", prefix=AT_WATCH_LIMIT)
    try:
        w.wait_for("watching", timeout=60)
        assert w.err.count("polling every 250 ms instead") == 1, w.err
        assert "watch limit" in w.err and "Traceback" not in w.err, w.err
        # (the fixture dated the sources 10 s back: polling sees this edit in a later second)
        (ws.root / "packages/a/src/a.js").write_text("A2;")
        w.wait_for("vx watch: packages/a/src/a.js changed", timeout=60)
        w.wait_for("2 tasks", count=2, timeout=60)
        assert built(ws, "a") == "A2;"
        assert w.ctrl_c() == 0
    finally:
        w.close()


@pytest.mark.feature("CLI-03")
@pytest.mark.parametrize("poll", [False, True])
def test_an_edit_runs_again_and_outputs_or_a_touch_do_not(ws, watch, poll):
    w = watch("build", "--all", env={"VX_WATCH_POLL": "1"} if poll else None)
    w.wait_for("watching")
    assert (ws.root / "packages/b/dist/out.js").read_text() == "B;"
    (ws.root / "packages/a/src/a.js").write_text("A2;")
    w.wait_for("vx watch: packages/a/src/a.js changed")
    w.wait_for("2 tasks", count=2)  # the second cycle's footer
    # mtimes set ahead, so that a polling watcher (which compares them to the second) sees each
    ahead = time.time() + 5
    output = ws.root / "packages/a/dist/out.js"
    output.write_text("hand-edited output")  # an output: no trigger
    backup = ws.root / "packages/b/notes~"
    backup.write_text("editor backup")
    for path in (output, ws.root / "packages/b/src/b.js", backup):  # b.js: a touch, same bytes
        os.utime(path, (ahead, ahead))
    # Then a real edit: events arrive in order, so had any of the three started a run, it would
    # show as a cycle before this edit's or among this cycle's "changed" paths.
    source = ws.root / "packages/a/src/a.js"
    source.write_text("A3;")
    os.utime(source, (ahead + 5, ahead + 5))
    w.wait_for("2 tasks", count=3)
    changed = [line for line in w.err.splitlines() if line.endswith(" changed")]
    assert changed == ["vx watch: packages/a/src/a.js changed"] * 2, w.err
    assert w.ctrl_c() == 0 and "vx watch: stopped" in w.err


@pytest.mark.feature("CLI-03")
def test_nothing_watch_leaves_in_dot_vx_is_committable(ws, watch):
    """In a repository whose .gitignore does not name `.vx/`, `git add -A` after a watch stages
    nothing of vx's: the watcher's probe file sits in `.vx/` itself, beside the cache and the
    receipts, and `.vx/` ignores all of it."""
    ws.write({".gitignore": "node_modules/\ndist/\n"}).commit("no .vx in .gitignore")
    w = watch("build", "--all")
    w.wait_for("watching")
    assert (ws.root / ".vx/watch-probe").exists()
    assert w.ctrl_c() == 0
    ws.git("add", "-A")
    staged = ws.git("diff", "--cached", "--name-only").split()
    assert not [path for path in staged if path.startswith(".vx")], staged


@pytest.mark.feature("CLI-73")
def test_a_broken_config_fails_that_cycle_and_watching_goes_on(ws, watch):
    w = watch("build", "--all")
    w.wait_for("watching")
    config = ws.root / "packages/a/vx.config.json"
    good = config.read_text()
    config.write_text(good.replace('"dependsOn"', '"dependOn"'))
    w.wait_for("did you mean `dependsOn`")
    config.write_text(good)
    (ws.root / "packages/a/src/a.js").write_text("A3;")
    deadline = time.monotonic() + 30
    while built(ws, "a") != "A3;":
        assert time.monotonic() < deadline, w.err
        time.sleep(0.1)
    assert w.proc.poll() is None
    assert w.ctrl_c() == 0


@pytest.mark.feature("CLI-73")
@pytest.mark.parametrize("flag", ["--dry", "--graph", "--summarize", "--keep-ui"])
def test_planning_and_summary_flags_are_refused(ws, flag):
    result = ws.vx("watch", "build", flag, summary=False)
    assert result.code == 2 and "cannot be used with `vx watch`" in result.err


@pytest.mark.feature("CLI-03")
def test_without_watchfiles_watch_says_how_to_get_it(ws):
    """watchfiles is the `watch` extra (it would slow every vx start, docs in pyproject.toml)."""
    code = (
        "import sys; sys.modules['watchfiles'] = None; sys.argv = ['vx', 'watch', 'build']; "
        "from vx.cli.main import main; sys.exit(main())"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VX_", "CI")) or k == "VX_SHARED_STORE"
    }
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ws.root,
        env={**env, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        proc.returncode == 2
        and "pip install -e '.[watch]'" in proc.stderr
        and "Traceback" not in proc.stderr
    )


@pytest.mark.feature("CLI-71")
def test_a_workspace_inside_a_larger_repository_sees_its_first_edit(repo, tmp_path):
    """git status spells paths from the repository's top: the workspace is a subdirectory here."""
    from support.workspace import Repo

    top = Repo(repo.root)
    top.write(
        {
            f"ws/{k}": v
            for k, v in npm_workspace(
                {"a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}}}
            ).items()
        }
    ).commit()
    ws = Repo(repo.root / "ws")
    w = Watcher(ws, "build", "--all")
    try:
        w.wait_for("watching")
        (ws.root / "packages/a/src/a.js").write_text("A2;")  # a committed file's first edit
        w.wait_for("vx watch: packages/a/src/a.js changed")
        assert w.ctrl_c() == 0
    finally:
        w.close()


@pytest.mark.feature("CLI-73")
def test_an_edit_during_a_cycle_and_sigterm_mid_cycle(ws, watch):
    # Run n of the task marks its start, then builds once `release<n>` exists (or fails after
    # two minutes): the test knows when a cycle runs and decides when it ends, no sleeps.
    marks, release = ws.root.parent / "marks", ws.root.parent / "release"
    slow = build_task(
        command=f"node -e \"const fs=require('fs');fs.appendFileSync('{marks}','x');"
        f"const go=fs.statSync('{marks}').size,t=Date.now();(function wait(){{"
        f"if(fs.existsSync('{release}'+go)){{fs.mkdirSync('dist',{{recursive:true}});"
        "fs.writeFileSync('dist/out.js',fs.readFileSync('src/a.js'))}"
        'else if(Date.now()-t>120000)process.exit(1);else setTimeout(wait,20)})()"'
    )
    config = ws.root / "packages/a/vx.config.json"
    config.write_text(__import__("json").dumps({"tasks": {"build": slow}}))
    ws.commit("slow")
    Path(f"{release}1").touch()  # the first run, before watching starts, ends at once

    def started(n: int) -> None:
        deadline = time.monotonic() + 120
        while not (marks.exists() and marks.stat().st_size >= n):
            assert time.monotonic() < deadline, w.err
            time.sleep(0.02)

    w = watch("a#build")
    w.wait_for("watching")
    (ws.root / "packages/a/src/a.js").write_text("A2;")
    w.wait_for("vx watch: packages/a/src/a.js changed")
    started(2)  # the cycle's task is waiting now
    (ws.root / "packages/a/src/a.js").write_text("A3;")  # lands during the cycle: judged after it
    Path(f"{release}2").touch()
    w.wait_for("vx watch: packages/a/src/a.js changed", count=2)
    started(3)  # the third cycle's task is waiting, for a release that never comes
    begun = time.monotonic()
    os.kill(w.proc.pid, signal.SIGTERM)  # the watcher alone, as a supervisor would
    assert w.proc.wait(timeout=60) == 0 and "vx watch: stopped" in w.err
    assert time.monotonic() - begun < 60  # the cycle's run was stopped, not waited out (120 s)


@pytest.mark.feature("CLI-71")
@pytest.mark.parametrize("poll", [False, True])
def test_an_edit_to_a_package_linked_into_node_modules_runs_again(ws, watch, poll):
    """After `npm install` every workspace package is linked into node_modules; the watcher may
    report an edit through the link (`node_modules/a/src/a.js`): it is the package's file."""
    (ws.root / "node_modules").mkdir()
    for name in ("a", "b"):
        os.symlink(f"../packages/{name}", ws.root / "node_modules" / name)
    w = watch("build", "--all", env={"VX_WATCH_POLL": "1"} if poll else None)
    w.wait_for("watching")
    (ws.root / "packages/a/src/a.js").write_text("A2;")
    w.wait_for("vx watch: packages/a/src/a.js changed")
    w.wait_for("2 tasks", count=2)
    assert built(ws, "b") == "B;" and built(ws, "a") == "A2;"
    assert w.ctrl_c() == 0


def idle(w: Watcher, timeout: float = 60) -> None:
    """Wait until the watcher runs no cycle: it has no child process (reaped, so its run is over)."""
    children = f"/proc/{w.proc.pid}/task/{w.proc.pid}/children"
    deadline = time.monotonic() + timeout
    while open(children).read().strip():
        assert time.monotonic() < deadline, f"a cycle never ended:\n{w.err}"
        time.sleep(0.02)


@pytest.mark.feature("CLI-72")
def test_a_task_that_rewrites_its_own_input_does_not_rerun_forever(repo, watch):
    """`gen` stamps src/stamp.js (an input of a's build) with a new value on every run: the
    first cycle's stamp starts one more cycle, the second's is named as a loop and ignored from
    then on, while a real edit still runs again."""
    gen = {
        "exec": {
            "command": "node -e \"require('fs').writeFileSync('src/stamp.js', '// ' + Date.now() + Math.random())\""
        }
    }
    ws = repo.write(
        npm_workspace(
            {
                "a": {
                    "tasks": {"gen": gen, "build": build_task(deps=["gen"])},
                    "files": {"src/a.js": "A;", "src/stamp.js": "// 0"},
                }
            }
        )
    ).commit()
    w = Watcher(ws, "build", "--all")
    try:
        w.wait_for("watching")
        w.wait_for("vx watch: packages/a/src/stamp.js is rewritten by every run", timeout=60)
        for n, text in enumerate(("A2;", "A3;", "A4;"), start=1):  # each edit between two runs
            idle(w)
            (ws.root / "packages/a/src/a.js").write_text(text)
            w.wait_for("vx watch: packages/a/src/a.js changed", count=n)
        # each of those cycles stamped the file again, and the stamp was judged before the next edit
        assert w.err.count("vx watch: packages/a/src/stamp.js changed") == 1, w.err
        assert w.err.count("is rewritten by every run") == 1, w.err
        assert w.ctrl_c() == 0
    finally:
        w.close()


@pytest.mark.feature("CLI-70")
def test_an_edit_in_a_project_the_selection_cannot_reach_runs_nothing(repo, watch):
    """`vx watch build -F b...` reaches a and b: an edit in c (outside the graph) is no trigger."""
    ws = repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}},
                "b": {"deps": ["a"], "tasks": {"build": build_task()}, "files": {"src/b.js": "B;"}},
                "c": {"tasks": {"build": build_task()}, "files": {"src/c.js": "C;"}},
            }
        )
    ).commit()
    w = Watcher(ws, "build", "-F", "b...")
    try:
        w.wait_for("watching")
        (ws.root / "packages/c/src/c.js").write_text("C2;")
        (ws.root / "packages/a/src/a.js").write_text("A2;")
        w.wait_for("vx watch: packages/a/src/a.js changed")
        assert "packages/c" not in w.err and "and 1 more" not in w.err, w.err
        assert w.ctrl_c() == 0
    finally:
        w.close()


SERVER = """const fs = require('fs');
fs.appendFileSync('../../starts.log', process.pid + ' ' + fs.readFileSync('src/msg.txt', 'utf8') + '\\n');
console.log('listening');
setInterval(() => {}, 1000);
"""


def _starts(ws) -> list[tuple[int, str]]:
    path = ws.root / "starts.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [(int(pid), msg) for pid, msg in (line.split(" ", 1) for line in lines)]


def _await(condition, what: str, w: Watcher, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never {what}:\n{w.err}"
        assert w.proc.poll() is None, f"vx watch ended ({w.proc.returncode}):\n{w.err}"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


@pytest.mark.feature("EX-08", "CLI-73")
def test_a_persistent_task_is_stopped_and_started_again_on_each_edit(repo):
    """A cycle that serves runs beside the watcher: an edit stops it (the server's process group
    with it) and starts the next, which builds what changed and serves again; Ctrl-C stops the
    last. Before, watching a persistent task was refused."""
    dev = {"exec": {"command": "node serve.js", "persistent": {"readyWhen": "listening"}}}
    ws = repo.write(
        npm_workspace(
            {
                "a": {
                    "tasks": {"build": build_task(), "dev": {**dev, "dependsOn": ["build"]}},
                    "files": {"src/msg.txt": "one", "serve.js": SERVER},
                }
            }
        )
    )
    ws.write({".gitignore": "node_modules/\ndist/\n.vx/\nstarts.log\n"}).commit()
    w = Watcher(ws, "dev", "--all")
    try:
        w.wait_for("watching")
        w.wait_for("a#dev is persistent: each change stops the run and starts it again")
        _await(lambda: len(_starts(ws)) == 1, "a first start", w)
        (ws.root / "packages/a/src/msg.txt").write_text("two")
        w.wait_for("vx watch: packages/a/src/msg.txt changed")
        _await(lambda: len(_starts(ws)) == 2, "a second start", w)
        (first, said), (second, now) = _starts(ws)
        assert (said, now) == ("one", "two")
        assert not _alive(first)  # the first cycle's server was stopped before the next started
        assert built(ws, "a") == "two"  # its build ran again in the new cycle
        assert w.ctrl_c() == 0
        assert "vx watch: stopped" in w.err
        _await(lambda: not _alive(second), "the last server stopped", w, timeout=30)
        assert len(_starts(ws)) == 2
    finally:
        w.close()


@pytest.mark.feature("CLI-70", "PL-02")
def test_an_edit_in_a_project_a_plugin_brings_into_the_graph_runs_again(repo, watch):
    """A `project` hook that makes b's build wait for a's brings a into the graph: the watcher
    judges edits by the graph a run sees, plugins applied, so an edit in a runs again (issue:
    plugins, every stage as the run has it)."""
    hook = (
        "def plugin(options):\n"
        "    def project(project, config, ctx):\n"
        "        if project.name == 'b':\n"
        "            config['tasks']['build']['dependsOn'] = ['a#build']\n"
        "        return config\n"
        "    return {'project': project}\n"
    )
    ws = repo.write(
        {
            **npm_workspace(
                {
                    "a": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A;"}},
                    "b": {"tasks": {"build": build_task(deps=())}, "files": {"src/b.js": "B;"}},
                }
            ),
            "vx.workspace.json": {"plugins": ["edge"]},
            "edge.py": hook,
        }
    ).commit()
    w = Watcher(ws, "b#build")
    try:
        w.wait_for("watching")
        assert built(ws, "a") == "A;", w.err  # the hook's edge: a's build ran first
        (ws.root / "packages/a/src/a.js").write_text("A2;")
        w.wait_for("vx watch: packages/a/src/a.js changed")
        assert w.ctrl_c() == 0
    finally:
        w.close()


LIFECYCLE = """
from pathlib import Path

from vx.events import TaskFinished


def plugin(options):
    def note(ctx, line):
        with open(Path(ctx.root) / "life.log", "a") as f:
            f.write(line + "\\n")

    def setup(ctx):
        note(ctx, "setup")
        ctx.on(lambda e: note(ctx, f"finished {e.result.id}") if isinstance(e, TaskFinished) else None)

    def teardown(ctx):
        note(ctx, "teardown")

    return {"setup": setup, "teardown": teardown}
"""


@pytest.mark.feature("CLI-03", "PL-02")
def test_plugins_are_set_up_once_per_watch_and_hear_every_cycle(ws, watch):
    """A plugin's `setup` runs once as `vx watch` starts — not on each cycle, nor each time the
    watcher re-reads the configs — what it subscribed hears every cycle's events, and `teardown`
    runs once as the watch stops (issue: plugins, setup ran on every watch cycle)."""
    gitignore = (ws.root / ".gitignore").read_text() + "life.log\n"
    ws.write({"life.py": LIFECYCLE, "vx.workspace.json": {"plugins": ["life"]}})
    ws.write({".gitignore": gitignore}).commit()
    log = ws.root / "life.log"

    def lines() -> list[str]:
        return log.read_text().splitlines() if log.exists() else []

    w = watch("a#build")
    w.wait_for("watching")
    (ws.root / "packages/a/src/a.js").write_text("A2;")
    w.wait_for("vx watch: packages/a/src/a.js changed")
    deadline = time.monotonic() + 60
    while lines().count("finished a#build") < 2:  # the second cycle's end, heard here
        assert time.monotonic() < deadline, (lines(), w.err)
        assert w.proc.poll() is None, w.err
        time.sleep(0.05)
    assert w.ctrl_c() == 0, w.err
    assert lines() == ["setup", "finished a#build", "finished a#build", "teardown"], w.err


SPY = """
from pathlib import Path

from vx.events import Notice, TaskFinished


def plugin(options):
    def note(ctx, line):
        with open(Path(ctx.root) / "spy.log", "a") as f:
            f.write(f"v{options['v']} {line}\\n")

    def setup(ctx):
        def heard(e):
            if isinstance(e, Notice):
                note(ctx, f"notice {e.message}")
            elif isinstance(e, TaskFinished):
                note(ctx, f"finished {e.result.id}")

        ctx.on(heard)

    return {"setup": setup}
"""

# A task that writes a forged event frame into every pipe it holds beyond its stdio.
FORGE = """
import os, stat, struct

import msgspec

data = msgspec.msgpack.encode(["Notice", {"message": "forged by a task"}])
frame = struct.pack(">I", len(data)) + data
for name in os.listdir("/proc/self/fd"):
    fd = int(name)
    try:
        if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, frame)
    except OSError:
        pass
os.makedirs("dist", exist_ok=True)
open("dist/out.js", "w").write(open("src/a.js").read())
"""


@pytest.mark.feature("CLI-03", "PL-02")
def test_a_task_cannot_write_into_the_watch_sessions_event_pipe(repo, watch):
    """Item: review of the watch's event pipe. Only a cycle's vx writes into the session's pipe:
    no task holds its write end, in a cycle whose plugins are the session's or in one whose
    plugins differ (options changed while watching, so the cycle forwards nothing), and a frame
    a task tries to write there reaches no plugin."""
    task = build_task(deps=(), command=f"{sys.executable} ../../forge.py")
    ws = repo.write(
        npm_workspace({"a": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}}})
    ).commit()
    gitignore = (ws.root / ".gitignore").read_text() + "spy.log\n"
    config = lambda v: {"plugins": [{"name": "spy", "options": {"v": v}}]}  # noqa: E731
    ws.write({"spy.py": SPY, "forge.py": FORGE, "vx.workspace.json": config(1)})
    ws.write({".gitignore": gitignore}).commit()
    old = time.time() - 10
    for path in (ws.root / "packages").rglob("*"):
        os.utime(path, (old, old), follow_symlinks=False)
    log = ws.root / "spy.log"

    def lines() -> list[str]:
        return log.read_text().splitlines() if log.exists() else []

    w = watch("a#build")
    w.wait_for("watching")
    ws.write({"vx.workspace.json": config(2), "packages/a/src/a.js": "A2;"})
    deadline = time.monotonic() + 60
    while "v2 finished a#build" not in lines():  # the second cycle's own plugin, at its end
        assert time.monotonic() < deadline, (lines(), w.err)
        assert w.proc.poll() is None, w.err
        time.sleep(0.05)
    assert w.ctrl_c() == 0, w.err  # the session reads its pipe to the end before it stops
    assert "v1 finished a#build" in lines(), (lines(), w.err)
    assert not [line for line in lines() if "forged" in line], (lines(), w.err)
