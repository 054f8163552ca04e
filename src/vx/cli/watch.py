"""`vx watch TASK… [run flags]`: run, then run again each time a file a
run could read changes.

Each cycle is a plain `vx run` with the same arguments, in a child process: it reads the
workspace afresh (a broken config fails that cycle and watching goes on), and a cycle where
nothing that matters changed is replayed from its receipt in milliseconds. The watcher
(`watchfiles`: inotify, or polling with `VX_WATCH_POLL=1`) looks at the whole workspace and
judges each event by content, not by the event: a path whose bytes and mode are what they were
when last judged is no edit, and an edit inside a project the run's graph does not hold is none
either (`--affected` watches every project); a path reported through a link (`node_modules/<package>/…`) is the
file it links to. Never a trigger: `.git`, `node_modules`, `.vx`, the tasks' declared
outputs, gitignored paths (one `git check-ignore` per batch), `*~` and `*.tsbuildinfo`. Writes
that land during a cycle are judged after it; a file written during a cycle that started the next
one, and written again during that one, is a task rewriting its own input: said once, and no
longer a trigger. A probe file proves the watcher delivers before "watching" is printed; when it
does not come back, or inotify is out of watches, the watcher polls instead (said once). A graph
with a persistent task serves: its cycle runs beside the watcher until an edit stops it and starts
the next. Ctrl-C tears the cycle down, prints "vx watch: stopped" and exits 0.

The workspace's plugins are set up once, as watching starts, and torn down as it stops
(`Session`): each cycle's run skips their `setup` and `teardown` and sends its events back, so
what a plugin's `setup` subscribed hears every cycle.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterable, Mapping

import xxhash

from vx.errors import UsageError
from vx.files.globs import GlobSet
from vx.install import module_argv

PROBE = os.path.join(".vx", "watch-probe")
_NEVER = ("node_modules", ".git", ".vx")
_NEVER_SUFFIXES = ("~", ".tsbuildinfo")
DEBOUNCE_MS = 150
POLL_MS = 250
# How long the probe may take to come back before inotify is judged not to deliver. Generous:
# a loaded machine delays events, and falling back only costs polling's CPU, never an edit.
PROBE_S = 5.0
PROBE_POLLING_S = 30.0
READER_JOIN_S = 5.0


def watch_verb(parsed, argv: list[str]) -> int:
    """`parsed` is the `vx run` parse of `argv` after the verb (the same flags, less those
    vx.cli.main refuses)."""
    from vx.cli.args import say

    rest, env = argv[1:], os.environ
    if not parsed.names:
        raise UsageError("name the tasks to watch", hint="e.g. `vx watch build`")
    from vx.store.location import refuse_linked_state
    from vx.workspace import discover as workspace

    root = workspace.discover(Path(os.getcwd())).root
    refuse_linked_state(root, root / ".vx" / "cache")  # the probe is written into .vx
    try:
        import watchfiles
    except ImportError:
        from vx.errors import EnvironmentFailure
        from vx.install import extra_hint

        raise EnvironmentFailure(
            "`vx watch` needs the watchfiles package, which is not installed",
            hint=extra_hint("watch", "watchfiles"),
        ) from None

    session = Session.start(root, env, say)
    try:
        return _watch(root, rest, parsed, env, say, watchfiles, session)
    finally:
        if session is not None:
            session.close(say)


def _watch(root: Path, rest: list[str], parsed, env, say, watchfiles, session) -> int:
    judge = Judge(root, env, parsed, session.host if session is not None else None)
    cycles = Cycles([*module_argv("vx"), "run", *rest], session)
    stop = threading.Event()

    def terminate(*_) -> None:  # a supervisor's stop: end the cycle's run too, then leave
        stop.set()
        cycles.forward(signal.SIGTERM)

    signal.signal(signal.SIGTERM, terminate)
    try:
        changes = _armed(root, watchfiles, stop, env.get("VX_WATCH_POLL") == "1", say)
        judge.arm()
        previous, window = (0, 0), _begin(cycles, judge, say)
        say(f"vx watch: watching {root} (Ctrl-C to stop)")
        for batch in changes:
            edited = judge.edits(path for _change, path in batch)
            edited = [rel for rel in edited if not judge.rewritten(rel, window, previous, say)]
            if edited and not stop.is_set():
                say(f"vx watch: {_shown(edited, root)} changed")
                if cycles.child is not None:  # a cycle that serves: stopped, then started again
                    cycles.stop()
                    window = (window[0], cycles.ended_ns)
                judge.refresh()
                previous, window = window, _begin(cycles, judge, say)
    except KeyboardInterrupt:
        cycles.settle()  # Ctrl-C reached a serving cycle too: its tasks are torn down first
    cycles.stop()
    say("vx watch: stopped")
    return 0


# A serving cycle's window is open until it is stopped: what its tasks write is its own.
_OPEN = 2**63 - 1


def _begin(cycles: Cycles, judge: Judge, say) -> tuple[int, int]:
    """Start the next cycle: one that serves (a persistent task in the graph) runs on beside the
    watcher until an edit stops it; any other runs to its end first. The wall-clock window it
    runs in, in ns (the unit of st_mtime_ns), closed before its process is reaped: a write made
    once it is gone is never taken for its own."""
    if judge.servers:
        if not cycles.served:
            say(
                f"vx watch: {', '.join(judge.servers)} is persistent: each change stops the run "
                "and starts it again"
            )
            cycles.served = True
        cycles.start()
        return cycles.started_ns, _OPEN
    cycles.run()
    return cycles.started_ns, cycles.ended_ns


def _armed(root: Path, watchfiles, stop: threading.Event, poll: bool, say):
    """The watcher, proved to deliver (the probe came back) before the first cycle, so every
    later edit is seen. inotify that delivers nothing (a Docker volume, WSL's Windows drives, a
    network filesystem) or hits the watch limit falls back to polling, said once."""
    while True:
        changes = watchfiles.watch(
            root,
            watch_filter=None,
            debounce=DEBOUNCE_MS,
            step=50,
            stop_event=stop,
            force_polling=poll or None,
            poll_delay_ms=POLL_MS,
            yield_on_timeout=True,
            rust_timeout=1000,
            raise_interrupt=True,
        )
        try:
            if _await_probe(root, changes, PROBE_S if not poll else PROBE_POLLING_S):
                return changes
            why = f"no file event came back within {PROBE_S} s"
        except OSError as exc:  # watchfiles' own words: "OS file watch limit reached…"
            why = f"the file watcher failed ({str(exc).split('. ')[0]})"
        if poll:
            say(
                "vx watch: warning: even polling reports nothing; edits may be missed "
                f"(is {root} writable?)"
            )
            return changes
        say(f"vx watch: {why}; polling every {POLL_MS} ms instead (VX_WATCH_POLL=1 from the start)")
        poll = True


class Session:
    """The workspace's plugins for the whole of a watch: set up once as it starts (their
    `setup`; the factories are each cycle's run's), torn down once as it ends. Each cycle's run
    is told, through its environment, which plugins are set up and which pipe its events go to;
    a thread here hands them to what `setup` subscribed (`ctx.on`)."""

    def __init__(self, host, say) -> None:
        from vx.plugins import host as plugins

        self.host = host
        host._emit = lambda notice: say(f"vx: warning: {notice.message}")
        read, self.write = os.pipe()
        self.env = plugins.session_env(host, self.write)
        self.reader = threading.Thread(
            target=plugins.read_session_events, args=(read, host), name="vx-watch-events"
        )
        self.reader.daemon = True
        self.reader.start()

    @classmethod
    def start(cls, root: Path, env: Mapping[str, str], say) -> Session | None:
        """None without plugins, or when they cannot be loaded now: each cycle then loads its
        own and says why (a broken config fails that cycle, and watching goes on)."""
        from vx.config import loader as config
        from vx.errors import VxError

        try:
            specs = config.load_workspace(root, env, remote=False).plugins
            if not specs:
                return None
            from vx.plugins import host as plugins

            host = plugins.load(specs, root, env, factories=False)
        except VxError:
            return None
        return cls(host, say)

    def close(self, say) -> None:
        """No cycle runs any more: end the pipe, hear its last events, tear the plugins down."""
        os.close(self.write)
        self.reader.join(READER_JOIN_S)  # a process left holding the pipe cannot hold the exit
        for message in self.host.teardown():
            say(f"vx: warning: {message}")


class Cycles:
    """Each cycle one `vx run`, in a child. Ctrl-C reaches it through the terminal's process
    group: wait while it tears its tasks down (never kill it from under them), then stop."""

    def __init__(self, argv: list[str], session: Session | None = None) -> None:
        self.argv = argv
        self.session = session
        self.child: subprocess.Popen | None = None
        self.started_ns = 0
        self.ended_ns = 0  # when the last cycle's process exited (before it was reaped)
        self.served = False  # a cycle has served (said once)
        self.signalled = False  # the running cycle was sent SIGTERM already

    def start(self) -> None:
        self.started_ns = time.time_ns()
        self.signalled = False
        if self.session is None:
            self.child = subprocess.Popen(self.argv)
        else:
            self.child = subprocess.Popen(
                self.argv,
                env={**os.environ, **self.session.env},
                pass_fds=(self.session.write,),
            )

    def run(self) -> int:
        self.start()
        assert self.child is not None
        try:
            os.waitid(os.P_PID, self.child.pid, os.WEXITED | os.WNOWAIT)  # exited, still a zombie
            self.ended_ns = time.time_ns()
            return self.child.wait()
        except KeyboardInterrupt:
            try:
                self.child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.child.terminate()
                self.child.wait()
            raise
        finally:
            self.child = None

    def stop(self) -> None:
        """End a cycle still running (one that serves): SIGTERM, as a supervisor stops a `vx
        run`, which tears its tasks down and exits; killed only if it has not in 30 s."""
        child = self.child
        if child is None:
            return
        if child.poll() is None and not self.signalled:
            child.send_signal(signal.SIGTERM)
        self.settle()

    def settle(self) -> None:
        """Wait for the running cycle to end (Ctrl-C reached it through the process group)."""
        child = self.child
        if child is None:
            return
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        self.ended_ns = time.time_ns()
        self.child = None

    def forward(self, sig: int) -> None:
        child = self.child
        if child is not None and child.poll() is None:
            self.signalled = True
            child.send_signal(sig)


def _await_probe(root: Path, changes, timeout_s: float) -> bool:
    """Write the probe until the watcher reports it: only then is every later edit seen. False
    when it has not come back within `timeout_s`."""
    from vx.dotvx import ignored_dir

    probe = root / PROBE
    # `.vx` itself holds the probe, and only its cache and receipts dirs carry a `*` .gitignore:
    # without one of its own, `git add -A` would take the probe where .gitignore names no `.vx`
    ignored_dir(str(probe.parent))
    done = threading.Event()

    def poke() -> None:
        n = 0
        while not done.is_set():
            probe.write_text(str(n))
            n += 1
            done.wait(0.2)

    threading.Thread(target=poke, daemon=True).start()
    started = time.monotonic()
    try:
        for batch in changes:
            if any(os.path.abspath(path) == str(probe) for _change, path in batch):
                return True
            if time.monotonic() - started > timeout_s:
                return False
        return False
    finally:
        done.set()


class Judge:
    """Decides whether a reported path is an edit a run could see."""

    def __init__(self, root: Path, env: Mapping[str, str], parsed=None, session=None) -> None:
        self.root = str(root)
        self.env = env
        self.session = session  # the watch's plugins (vx.plugins.host.Host), set up once
        self.parsed = (
            parsed  # the run's selection: edits in projects it cannot reach are no trigger
        )
        self.packages: dict[str, str] = {}  # project dir -> package name
        self.reach: frozenset[str] | None = None  # project dirs in the run's graph; None: every one
        self.servers: list[str] = []  # persistent tasks in the run's graph: a cycle would never end
        self.states: dict[str, tuple[int, str] | None] = {}
        self.armed_ns = time.time_ns()
        self.outputs: dict[str, GlobSet] = {}
        self.prefix = _git_prefix(self.root)  # the workspace inside its repository ("" at the top)
        self.mtimes: dict[str, int] = {}  # st_mtime_ns of each path as last judged
        self.by_run: dict[
            str, tuple[int, int]
        ] = {}  # path -> the window of the cycle that last wrote it
        self.looping: set[str] = set()  # paths every run rewrites: no longer triggers
        self.refresh()

    def arm(self) -> None:
        self.armed_ns = time.time_ns()

    def refresh(self) -> None:
        """Re-read the declared outputs (a cycle may have changed a config); keep the last on error.
        The projects and configs are the ones a run sees: the plugins' `discover` and `project`
        hooks applied."""
        from vx.errors import VxError
        from vx.plugins.shaped import shaped_projects
        from vx.workspace import discover as workspace

        try:
            ws, configs = shaped_projects(
                workspace.discover(Path(self.root)), self.env, self.session
            )
        except VxError:
            return
        self.outputs = {
            ws.packages[name].dir: GlobSet(
                [g for t in cfg.tasks.values() if t.cache for g in t.cache.output_files]
            )
            for name, cfg in configs.items()
        }
        self.packages = {pkg.dir: name for name, pkg in ws.packages.items() if pkg.dir}
        self.reach = self._reach(ws, configs)

    def _reach(self, ws, configs) -> frozenset[str] | None:
        """The project dirs the run's graph holds. A project outside it enters only
        through an edit to one inside it or to the root (a dependency, a `pkg#task`, turbo.json),
        which is watched. None — watch every project — for `--affected`, whose graph depends on
        the edits themselves, or when the selection does not resolve (the cycle will say why)."""
        if self.parsed is None or self.parsed.affected is not None:
            return None
        from vx import prepare as planning
        from vx.cli.run import project_patterns
        from vx.errors import VxError
        from vx.plan.graph import Selection, build_graph
        from vx.plan.tasks import package_of

        cwd = Path(os.getcwd())
        try:
            cwd_pkg = package_of(ws, cwd)
            req = planning.RunRequest(
                cwd=cwd,
                names=tuple(self.parsed.names),
                all=self.parsed.all,
                select=planning.Selectors(
                    tuple(self.parsed.filters),
                    project_patterns(self.parsed.projects),
                    project_patterns(self.parsed.exclude),
                ),
            )
            projects = planning.filtered(req, ws, configs, cwd_pkg)[0] if req.select else None
            graph = build_graph(ws, configs, Selection(req.names, cwd_pkg, req.all, projects))
        except VxError:
            return None
        self.servers = [
            str(t)
            for t, n in graph.nodes.items()
            if n.config.exec is not None and n.config.exec.persistent is not None
        ]
        return frozenset(node.project_dir for node in graph.nodes.values())

    def _unreached(self, rel: str) -> bool:
        """Inside a project the run's graph does not hold (the deepest project dir wins)."""
        if self.reach is None:
            return False
        best = ""
        for directory in self.packages:
            if (rel == directory or rel.startswith(directory + "/")) and len(directory) > len(best):
                best = directory
        return bool(best) and best not in self.reach

    def edits(self, paths: Iterable[str]) -> list[str]:
        candidates = sorted(
            {rel for rel in (self._rel(p) for p in paths) if rel and not self._never(rel)}
        )
        candidates = [
            rel for rel in candidates if not self._is_output(rel) and not self._unreached(rel)
        ]
        ignored = _git_ignored(self.root, candidates)
        candidates = [rel for rel in candidates if rel not in ignored]
        clean = _git_clean(
            self.root, [rel for rel in candidates if rel not in self.states], self.prefix
        )
        return [rel for rel in candidates if self._changed(rel, rel in clean)]

    def rewritten(self, rel: str, window: tuple[int, int], previous: tuple[int, int], say) -> bool:
        """Whether an edit is a run rewriting its own input, again: written while the last cycle
        ran (`window`), and while the one before it ran (`previous`) too. Without this, a task
        that stamps a file among its inputs would start a run after every run, forever."""
        if not window[0] <= self.mtimes.get(rel, -1) <= window[1]:
            self.looping.discard(rel)  # written between runs: a person's edit, a trigger again
            return False
        if rel in self.looping:
            return True
        if self.by_run.get(rel) == previous:
            self.looping.add(rel)
            say(
                f"vx watch: {rel} is rewritten by every run (a task writes into an input); its changes "
                "no longer start a run — declare it in the task's cache.outputs or move it out of the inputs"
            )
            return True
        self.by_run[rel] = window
        return False

    def _rel(self, path: str) -> str | None:
        """The workspace path an event is about, read through links: after `npm install` each
        package is also `node_modules/<name>`, and inotify may report its files by that name."""
        if "node_modules" in path:
            path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        rel = os.path.relpath(path, self.root)
        return None if rel.startswith("..") else rel

    def _never(self, rel: str) -> bool:
        parts = rel.split(os.sep)
        return any(p in _NEVER for p in parts) or rel.endswith(_NEVER_SUFFIXES)

    def _is_output(self, rel: str) -> bool:
        for directory, globs in self.outputs.items():
            if globs and (not directory or rel.startswith(directory + "/")):
                inner = rel[len(directory) + 1 :] if directory else rel
                if globs.matches(inner):
                    return True
        return False

    def _changed(self, rel: str, clean: bool = False) -> bool:
        """Content state: bytes and mode against the last judged state. A path never judged is no
        edit when git says it is as committed (a touch); else it counts when modified after
        arming (or gone)."""
        path = os.path.join(self.root, rel)
        try:
            st = os.stat(path)
            with open(path, "rb") as f:
                state = (st.st_mode, xxhash.xxh3_64_hexdigest(f.read()))
            fresh = st.st_mtime_ns >= self.armed_ns or st.st_ctime_ns >= self.armed_ns
            self.mtimes[rel] = st.st_mtime_ns
        except IsADirectoryError:
            return False
        except OSError:
            state, fresh = None, True
        before = self.states.get(rel, "unseen")
        self.states[rel] = state
        if before == "unseen":
            return fresh and not clean
        return before != state


def _git_ignored(root: str, rels: list[str]) -> set[str]:
    """Which of `rels` git ignores: one `git check-ignore` for the whole batch."""
    if not rels:
        return set()
    try:
        proc = subprocess.run(
            ["git", "check-ignore", "--stdin", "-z"],
            cwd=root,
            input="\0".join(rels).encode(),
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {p for p in proc.stdout.decode(errors="surrogateescape").split("\0") if p}


def _git_prefix(root: str) -> str:
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "--show-prefix"], cwd=root, capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.decode(errors="surrogateescape").strip() if proc.returncode == 0 else ""


def _git_clean(root: str, rels: list[str], prefix: str = "") -> set[str]:
    """Which of `rels` git tracks with no change against the index or HEAD (one `git status`,
    whose porcelain paths are the repository's: `prefix` is the workspace's place in it)."""
    if not rels:
        return set()
    try:
        proc = subprocess.run(
            [
                "git",
                "status",
                "--porcelain=v1",
                "-z",
                "--no-renames",
                "--untracked-files=all",
                "--",
                *rels,
            ],
            cwd=root,
            capture_output=True,
            timeout=30,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
        tracked = subprocess.run(
            ["git", "ls-files", "-z", "--", *rels], cwd=root, capture_output=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return set()
    if proc.returncode or tracked.returncode:
        return set()
    listed = {
        entry[3:].removeprefix(prefix)
        for entry in proc.stdout.decode(errors="surrogateescape").split("\0")
        if len(entry) > 3
    }
    return {p for p in tracked.stdout.decode(errors="surrogateescape").split("\0") if p} - listed


def _shown(edited: list[str], root: Path) -> str:
    return edited[0] + (f" and {len(edited) - 1} more" if len(edited) > 1 else "")
