"""Remote execution: the REAPI server's workers as a pool of slots beside the local ones.

A task the plan sent remote (`TaskPlan.remote`) takes a remote slot, ships its declared
inputs and its upstream outputs, runs on a worker and gets its outputs written back into the
workspace; the rebuilder then saves it like a task that ran here. A command that fails on the
worker is the task's failure. A failure of the server or the worker is not: the task runs
here instead, with one warning for the run, and so does every later remote task of the run
(a dead server must not cost each task its own wait).

The key names the toolchain measured here (the Node version, the `inputs.runtime` probes'
outputs): the action checks on the worker, before the command, that the worker has that
toolchain (`guarded`). A worker that differs cannot build this key: nothing it did is kept, the
task runs here with one warning, and the server stays in use for the tasks whose toolchain
matches.

grpc loads with `engine/remote_exec.py`, when the first remote task starts: a run whose
remote tasks all hit the cache never imports it.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from msgspec.structs import replace

from vx.events import Emit, Notice, TaskStage
from vx.model import LogChunk, ProcessResult, RemoteExecution, TaskId, TaskNode, TaskPlan

# How a remote action's toolchain check ends when the worker differs from the key: this exit
# code, and stderr starting with the mark, then the one line saying what differed.
MISMATCH_EXIT = 97
MISMATCH_MARK = b"vx-toolchain: "
# The most of the action's one `sh -c` argument the check may take: Linux caps an argument at
# 128 KiB (MAX_ARG_STRLEN), and the command needs its room too.
CHECK_BUDGET = 96 * 1024


class RemotePool:
    """The remote slots of one run and the executor behind them (opened on first use)."""

    def __init__(
        self,
        settings: Any,  # store.remote.RemoteSettings of the REAPI server
        config: RemoteExecution,
        nodes: Mapping[TaskId, TaskNode],
        emit: Emit,
        download: str = "all",
        deferrable: bool = False,
        rerun: bool = False,
        stop: asyncio.Event | None = None,
    ):
        self.settings = settings
        self.config = config
        self.slots = asyncio.Semaphore(max(1, config.capacity))
        self.nodes = nodes
        self.emit = emit
        self.download = download  # --download: all | toplevel | none
        self.rerun = rerun  # `--force`: the server's action cache is not asked either
        self.stop = stop  # set when the run stops (a signal): actions in flight are cancelled
        self.deferrable = deferrable  # no key of the run reads outputs from disk
        self.down: str | None = None  # why remote execution stopped for this run
        # platforms no worker took within the queue bound: their later tasks run here at once
        self.unplaced: set[tuple[tuple[str, str], ...]] = set()
        self.ran = 0
        self.fell_back = 0
        # task -> its outputs left on the server (reapi_exec.Listing), while not fetched
        self.listings: dict[TaskId, Any] = {}
        # task -> (its result, input snapshot, started_ns): what saving it once fetched needs
        self.unsaved: dict[TaskId, tuple[ProcessResult, Any, int]] = {}
        self.fetch_lock = asyncio.Lock()
        self.only: set[TaskId] = set()  # `remote: "only"` tasks that ran: never fetched
        # the workers' toolchain differences told: a later task refused so runs here quietly
        self.refusals: set[str] = set()
        self._executor: Any = None
        # `workerInstall`: the node_modules entries shipped, and the links to the install
        self._install: tuple[list[str], Any] | None = None

    def defers(self, node: TaskNode, plan: TaskPlan) -> bool:
        """Whether this task's outputs stay on the server (`--download`, or `remote: "only"`,
        whose outputs never come here)."""
        if plan.remote == "only":
            return True
        if self.download == "all" or not self.deferrable:
            return False
        return self.download == "none" or not node.requested

    def wants(self, plan: TaskPlan) -> bool:
        return (
            bool(plan.remote)
            and self.down is None
            and tuple(sorted(plan.platform)) not in self.unplaced
        )

    async def execute(
        self,
        root: str,
        node: TaskNode,
        plan: TaskPlan,
        plans: Mapping[TaskId, TaskPlan],
        on_output: Callable[[LogChunk], None],
    ) -> ProcessResult | None:
        """Run the task on a worker; None when the infrastructure failed (run it here)."""
        started = time.monotonic()
        loop = asyncio.get_running_loop()

        def on_stage(stage: str) -> None:  # from the executor's thread: told on the loop
            if stage in ("queued", "executing"):
                loop.call_soon_threadsafe(self.emit, TaskStage(node.id, stage))

        work = asyncio.ensure_future(
            asyncio.to_thread(self._run, root, node, plan, plans, on_stage)
        )
        if self.stop is not None:
            stopping = asyncio.ensure_future(self.stop.wait())
            await asyncio.wait({work, stopping}, return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not work.done():  # the run is stopping: cancel the action, as a local one is killed
                work.add_done_callback(lambda done: done.exception())  # its end is of no interest
                if self._executor is not None:
                    await asyncio.to_thread(self._executor.cancel_all)
                return ProcessResult(
                    exit_code=130, duration_ms=(time.monotonic() - started) * 1000, aborted=True
                )
        try:
            outcome = await work
        except Exception as exc:  # noqa: BLE001 — checked below: only the wire's failure falls back
            from vx.engine.remote_exec import ExecFailure

            if not isinstance(exc, (ExecFailure, OSError)):
                raise
            self._fall_back(exc, node)
            return None
        differs = mismatch(outcome)
        if differs is not None:  # the worker cannot build this key: nothing of its run is kept
            return self._refused(differs, node, plan, started, on_output)
        self.ran += 1
        if outcome.listing is not None:
            self.listings[node.id] = outcome.listing
            if plan.remote == "only":
                self.only.add(node.id)
        log = []
        for stream, data in ((1, outcome.stdout), (2, outcome.stderr)):
            if data:
                chunk = LogChunk(stream, data)
                on_output(chunk)
                log.append(chunk)
        return ProcessResult(
            exit_code=outcome.exit_code,
            duration_ms=(time.monotonic() - started) * 1000,
            log=tuple(log),
            timed_out=outcome.timed_out,
        )

    def _fall_back(self, exc: Exception, node: TaskNode) -> None:
        """The server or its worker failed this task: it runs here, and so do the run's later
        remote tasks (of the platform no worker took, when that was the failure), said once."""
        from vx.engine.remote_exec import Unplaced

        self.fell_back += 1
        if isinstance(exc, Unplaced):  # the server is fine: only this platform stays here
            if exc.platform not in self.unplaced:
                self.unplaced.add(exc.platform)
                self.emit(
                    Notice(
                        f"{exc} on {self.settings.endpoint}: {node.id} and the rest of this "
                        "run's remote tasks of that platform run here",
                        id=node.id,
                    )
                )
        elif self.down is None:
            self.down = str(exc)
            self.emit(
                Notice(
                    f"remote execution failed ({exc}) on {self.settings.endpoint}: "
                    f"{node.id} and the rest of this run's remote tasks run here",
                    id=node.id,
                )
            )

    def _refused(
        self,
        differs: str,
        node: TaskNode,
        plan: TaskPlan,
        started: float,
        on_output: Callable[[LogChunk], None],
    ) -> ProcessResult | None:
        """The worker's toolchain differs from the key's: the task runs here (None), said once per
        difference; a `remote: "only"` task fails instead, saying why."""
        self.fell_back += 1
        if plan.remote == "only":  # never here: the task fails, saying why
            chunk = LogChunk(
                2, f"vx: {node.id} cannot run on the remote worker: {differs}\n".encode()
            )
            on_output(chunk)
            return ProcessResult(
                exit_code=1, duration_ms=(time.monotonic() - started) * 1000, log=(chunk,)
            )
        if differs not in self.refusals:
            self.refusals.add(differs)
            self.emit(
                Notice(
                    f"the remote worker cannot build {node.id}'s key ({differs}): it runs here",
                    id=node.id,
                )
            )
        return None

    def _run(
        self,
        root: str,
        node: TaskNode,
        plan: TaskPlan,
        plans: Mapping[TaskId, TaskPlan],
        on_stage: Callable[[str], None] | None = None,
    ):
        if self._executor is None:
            from vx.engine.remote_exec import RemoteExecutor

            self._executor = RemoteExecutor(
                self.settings,
                quiet_s=self.config.update_timeout_ms / 1000,
                queue_s=self.config.queue_timeout_ms / 1000,
            )
            self._executor.skip_cache_lookup = self.rerun
        from vx.engine.remote_exec import DEFAULT_PATH, RemoteTask

        outputs = plan.outputs
        assert outputs is not None  # the plan sends only cached tasks
        roots = outputs.globs.roots() if outputs.globs is not None else ()
        grafted = [self.listings[t] for t in self.upstream(node) if t in self.listings]
        runtime = plan.record.runtime if plan.record is not None else ()
        inputs = self._inputs(root, node, plan, plans)
        command = plan.command or ""
        if self.config.worker_install is not None:
            if self._install is None:  # the same for every action of the run: walked once
                self._install = install_links(root, self.nodes, self.config.worker_install)
            inputs += self._install[0]
            grafted.append(self._install[1])
            command = with_bins(command, node.project_dir)
            command = rebasing_build_info(
                command, node.project_dir, self.config.worker_install, roots
            )
        task = RemoteTask(
            root=root,
            project_dir=node.project_dir,
            inputs=inputs,
            fetch=not self.defers(node, plan),
            grafted=tuple(grafted),
            command=guarded(command, node.project_dir, runtime),
            env=shipped_env(node, plan, DEFAULT_PATH),
            platform=plan.platform,
            output_paths=roots,
            timeout_ms=plan.timeout_ms,
            allows=outputs.allows,
            on_stage=on_stage,
        )
        outcome = self._executor.run(task)
        if outcome.cached and not self.rerun and mismatch(outcome) is not None:
            # A server that caches failed actions answers with an earlier worker's refusal:
            # ask a worker, which may well have the key's toolchain.
            outcome = self._executor.run(replace(task, skip_cache_lookup=True))
        return outcome

    def _inputs(
        self, root: str, node: TaskNode, plan: TaskPlan, plans: Mapping[TaskId, TaskPlan]
    ) -> list[str]:
        """The task's input files, its package.json, and every upstream task's outputs as
        they are on disk now (each upstream task has finished)."""
        paths = [p for p, _ in plan.inputs.files] if plan.inputs is not None else []
        manifest = f"{node.project_dir}/package.json" if node.project_dir else "package.json"
        if os.path.exists(os.path.join(root, manifest)):
            paths.append(manifest)
        for dep in self.upstream(node):
            upstream = plans.get(dep)
            if upstream is not None and upstream.outputs is not None and dep not in self.listings:
                paths += upstream.outputs.walk(Path(root))
        return paths

    def upstream(self, node: TaskNode) -> list[TaskId]:
        """Every task upstream of `node`, dependencies before their dependants."""
        order: list[TaskId] = []
        seen: set[TaskId] = set()

        def visit(tid: TaskId) -> None:
            if tid in seen:
                return
            seen.add(tid)
            for dep in self.nodes[tid].deps if tid in self.nodes else ():
                visit(dep)
            order.append(tid)

        for dep in node.deps:
            visit(dep)
        return order

    async def materialise(self, root: str, tid: TaskId) -> str | None:
        """Write a task's outputs left on the server into the workspace; why not, on failure."""
        listing = self.listings.get(tid)
        if listing is None or tid in self.only:
            return None
        from vx.engine.remote_exec import ExecFailure

        try:
            await asyncio.to_thread(self._executor.materialise, root, listing)
        except (ExecFailure, OSError) as exc:
            return str(exc)
        del self.listings[tid]
        return None

    def close(self) -> None:
        if self._executor is not None:
            self._executor.close()

    def summary(self) -> str | None:
        if not self.ran and not self.fell_back:
            return None
        line = f"remote execution: {self.ran} task{'s' * (self.ran != 1)} ran on {self.settings.endpoint}"
        if self.fell_back:
            line += f", {self.fell_back} ran here instead"
        if self.listings:
            line += f"; the outputs of {len(self.listings)} were left there (--download={self.download})"
        return line


def mismatch(outcome: Any) -> str | None:
    """What differed, when the worker's toolchain check refused the action (`guarded`)."""
    if outcome.exit_code != MISMATCH_EXIT or not outcome.stderr.startswith(MISMATCH_MARK):
        return None
    line = outcome.stderr[len(MISMATCH_MARK) :].split(b"\n", 1)[0]
    return line.decode("utf-8", "replace").strip() or "the worker's toolchain differs"


# The check's shell functions: `vx_no` refuses (exit MISMATCH_EXIT, after MISMATCH_MARK);
# `vx_trim` trims as the probes here do (it differs from Python's strip() only on Unicode
# spaces: a refusal, never a false match); `vx_p` runs a probe again in a directory and
# compares its stdout and stderr, naming the first line of each when they differ. The probe's
# stderr goes to a file in a directory only the check made (mktemp -d, else mkdir, which fails on
# any name already there): others sharing the worker's /tmp could plant a guessable name.
_CHECK = r"""vx_no() { printf 'vx-toolchain: %s\n' "$1" >&2; exit 97; }
vx_nl='
'
vx_trim() {
  vx_t=$1
  while :; do case $vx_t in [[:space:]]*) vx_t=${vx_t#?} ;; *) break ;; esac; done
  while :; do case $vx_t in *[[:space:]]) vx_t=${vx_t%?} ;; *) break ;; esac; done
}
vx_p() {
  vx_d=$(umask 077 && mktemp -d "${TMPDIR:-/tmp}/vx-probe.XXXXXX" 2>/dev/null) || {
    vx_d=${TMPDIR:-/tmp}/vx-probe.$$
    mkdir -m 700 "$vx_d" 2>/dev/null || vx_no "no private temporary directory on the worker"
  }
  vx_e=$vx_d/stderr
  vx_o=$(cd "$1" && sh -c "$2" 2>"$vx_e" </dev/null)
  vx_r=$?
  vx_trim "$vx_o"; vx_o=$vx_t
  vx_trim "$(cat "$vx_e" 2>/dev/null)"; rm -f "$vx_e"; rmdir "$vx_d" 2>/dev/null
  [ "$vx_r" = 0 ] || vx_no "the runtime input \`$2\` exits with $vx_r on the worker"
  vx_w=${vx_o%%"$vx_nl"*} vx_k=${3%%"$vx_nl"*}
  [ "$vx_o" = "$3" ] || vx_no "the runtime input \`$2\` prints $vx_w on the worker, the key has $vx_k"
  vx_w=${vx_t%%"$vx_nl"*} vx_k=${4%%"$vx_nl"*}
  [ "$vx_t" = "$4" ] || vx_no "the runtime input \`$2\` writes $vx_w to stderr on the worker, the key has $vx_k"
}
"""


def guarded(command: str, project_dir: str, runtime: tuple[tuple[str, str], ...]) -> str:
    """`command` behind a POSIX sh check, run first on the worker, that the worker has the
    toolchain `runtime` (the key's: the Node version, each probe's stdout and stderr) names:
    `node -v` on its PATH, and every probe run again there, in the project directory
    (`runtime`) or the workspace root (`workspaceRuntime`). A difference exits MISMATCH_EXIT
    with one line saying what differed. The check is part of the Command, so of the Action
    digest: a result the server keeps for it was made by a worker that passed it."""
    if not runtime:
        return command
    import shlex

    q = shlex.quote
    root = "/".join(".." for _ in project_dir.split("/")) if project_dir else "."
    lines = ["(\n", _CHECK]
    values = dict(runtime)
    node = values.get("node")
    if node is not None:
        lines.append(
            f"vx_k={q(node)}\n"
            "if command -v node >/dev/null 2>&1; then vx_n=$(node -v 2>/dev/null) || vx_n=unknown;"
            ' vx_trim "$vx_n"; vx_n=$vx_t; else vx_n=absent; fi\n'
            '[ "$vx_n" = "$vx_k" ] || vx_no "worker has node $vx_n, the key has $vx_k"\n'
        )
    size = sum(len(line.encode()) for line in lines)
    for label, _ in runtime:
        for kind, where in (("runtime:", "."), ("ws-runtime:", root)):
            if label.startswith(kind) and label.endswith(":stdout"):
                probe = label[len(kind) : -len(":stdout")]
                err = values.get(f"{kind}{probe}:stderr", "")
                line = f"vx_p {q(where)} {q(probe)} {q(values[label])} {q(err)}\n"
                size += len(line.encode())
                # An action no worker could start (an argument holds no NUL, and has a cap)
                # is refused here instead: a worker failure would keep later tasks here too.
                why, shown = None, probe.replace("\0", "\\0")
                if "\0" in line:
                    why = f"the runtime input `{shown}` prints a NUL byte, which the worker cannot compare"
                elif size > CHECK_BUDGET:
                    why = f"the runtime input `{shown}` prints too much to check on the worker"
                if why is not None:
                    lines.append(f"vx_no {q(why)}\n")
                    return _wrapped(lines, command)
                lines.append(line)
    return _wrapped(lines, command)


def _wrapped(lines: list[str], command: str) -> str:
    import shlex

    # In a subshell: what the check sets (its functions, its variables, some of which a task's
    # environment may also name) goes with it, and the command starts from the shell as shipped.
    return "".join(lines) + f") || exit $?\nexec /bin/sh -c {shlex.quote(command)}"


def shipped_env(node: TaskNode, plan: TaskPlan, default_path: str) -> dict[str, str]:
    """The variables of the task's environment that its key folds (`exec.env.define`, and
    `cache.inputs.env` or NODE_ENV and the like where they reach the task), with the values the
    task would see here, and a PATH for the worker's platform unless defined: never the rest
    of the host's."""
    keyed = {name for name, _ in plan.record.env} if plan.record is not None else set()
    define = node.config.exec.env.define if node.config.exec is not None else {}
    env = {name: value for name, value in plan.env.items() if name in keyed or name in define}
    env["PATH"] = define.get("PATH", default_path)  # here PATH gains local node_modules/.bin dirs
    return env


def install_links(
    root: str, nodes: Mapping[TaskId, TaskNode], install: str
) -> tuple[list[str], Any]:
    """What an action's input root holds of the install when the workers have this workspace
    installed at `install` (`remoteExecution.workerInstall`): the workspace's node_modules
    directories as they are here (pnpm's links, `.bin` shims, workspace links), except the
    packages themselves, which are symlinks to the workers' copy: pnpm's store
    (`node_modules/.pnpm`) as one link, or entry by entry when some of its packages resolve a
    workspace package (`_pnpm_store`); in a hoisted tree (npm, yarn, pnpm's hoisted linker)
    each installed package of the root `node_modules` (`@scope/name` one by one), its
    workspace links shipped as they are. So Node's resolution from a project finds its
    packages, and the workspace's own packages with their upstream outputs, in the input root
    (a workspace link followed into the workers' copy would find that copy's sources and stale
    or absent outputs), and the store's thousands of files are never hashed nor sent."""
    from vx.engine.remote_exec import Listing

    paths: list[str] = []
    links: list[tuple[str, str]] = []
    modules = os.path.join(root, "node_modules")
    store = os.path.join(modules, ".pnpm")
    dirs = sorted({n.project_dir for n in nodes.values() if n.project_dir} | {""})
    if _isolated(store):
        _pnpm_store(root, store, install, paths, links)
    elif os.path.isdir(modules) and not os.path.islink(modules):
        for project in dirs:  # a project's own tree holds the versions not hoisted
            rel = f"{project}/node_modules" if project else "node_modules"
            top = os.path.join(root, rel)
            if os.path.isdir(top) and not os.path.islink(top):
                _hoisted(top, rel, install, paths, links)
        return paths, Listing(files=(), links=tuple(links))
    else:  # nothing installed here: the workers' whole tree
        links.append(("node_modules", f"{install}/node_modules"))
        dirs = [d for d in dirs if d]
    for project in dirs:
        top = os.path.join(root, project, "node_modules")
        if not os.path.islink(top) and os.path.isdir(top):
            _shipped(root, top, paths, skip="node_modules/.pnpm")
    return paths, Listing(files=(), links=tuple(links))


def _isolated(store: str) -> bool:
    """Whether `store` is pnpm's virtual store (its isolated linker); the hoisted linker leaves
    only `lock.yaml` there."""
    if os.path.islink(store) or not os.path.isdir(store):
        return False
    return any(name != "lock.yaml" for name in os.listdir(store))


def _shipped(root: str, top: str, paths: list[str], skip: str = "") -> None:
    """Every file and symlink under `top` (as `root`-relative paths), symlinks not followed,
    the directory `skip` left out."""
    for here, subdirs, files in os.walk(top):
        rel = os.path.relpath(here, root)
        subdirs[:] = [d for d in subdirs if f"{rel}/{d}" != skip]
        # os.walk lists a symlink to a directory among `subdirs` and does not follow it
        for name in [*subdirs, *files]:
            if name in files or os.path.islink(os.path.join(here, name)):
                paths.append(f"{rel}/{name}")


def _pnpm_store(
    root: str, store: str, install: str, paths: list[str], links: list[tuple[str, str]]
) -> None:
    """pnpm's store in the input root: one link to the workers' `.pnpm`, unless a package in it
    resolves a workspace package (a dependency or peer that is one:
    `.pnpm/<pkg>@v_…/node_modules/<ws>` links to packages/<ws>). Node resolves from a module's
    real path, so a package reached through a link into the workers' copy resolves the image's
    workspace link and the image's stale copy of the package; such a package is shipped as it
    is here, files and links, and so is every store package that depends on it, directly or
    not (through the workers' copy it would reach the image's). Then `.pnpm` is a directory:
    those entries shipped, every other `.pnpm/<entry>` one link to the workers' copy, and
    `.pnpm/node_modules` (pnpm's hidden hoisting, workspace packages among it) with its links
    as they are. docs/remote-execution.md, "Packages on the workers"."""
    names = sorted(os.listdir(store))
    users: dict[str, set[str]] = {}  # entry -> the entries linking to it
    todo: list[str] = []
    for name in names:
        if name == "node_modules":
            continue
        for link, target in _package_links(f"{store}/{name}/node_modules", f"{name}/node_modules"):
            # where the link points, relative to the store (pure string work: thousands of links)
            to = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
            if to == ".." or to.startswith(("../", "/")):
                todo.append(name)
            else:
                users.setdefault(to.split("/", 1)[0], set()).add(name)
    shipped: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in shipped:
            shipped.add(name)
            todo += users.get(name, ())
    if not shipped:
        links.append(("node_modules/.pnpm", f"{install}/node_modules/.pnpm"))
        return
    found: list[str] = []
    for name in names:
        rel = f"node_modules/.pnpm/{name}"
        if name in shipped:
            _shipped(root, os.path.join(store, name), found)
        elif name == "node_modules" and os.path.isdir(os.path.join(store, name)):
            _hoisted(os.path.join(store, name), rel, install, found, links)
        else:
            links.append((rel, f"{install}/{rel}"))
    for rel in found:  # thousands of links: read once a run, not by every action's tree
        full = os.path.join(root, rel)
        if os.path.islink(full):
            links.append((rel, os.readlink(full)))
        else:
            paths.append(rel)


def _package_links(modules: str, rel: str) -> list[tuple[str, str]]:
    """The symlinks of the `node_modules` directory `modules` (a scope's, `@types/…`, one by
    one), each as its path under `rel` with its target."""
    out: list[tuple[str, str]] = []
    try:
        entries = list(os.scandir(modules))
    except OSError:
        return out
    for entry in entries:
        if entry.is_symlink():
            out.append((f"{rel}/{entry.name}", os.readlink(entry.path)))
        elif entry.name.startswith("@") and entry.is_dir():
            out += _package_links(entry.path, f"{rel}/{entry.name}")
    return out


def _hoisted(
    top: str, rel: str, install: str, paths: list[str], links: list[tuple[str, str]]
) -> None:
    """A hoisted `node_modules` (`rel`, at `top` here): its symlinks (workspace links, `.bin`'s
    entries) shipped as they are, every other entry a link to the same name in the workers'
    install; a scope directory (`@types`) entry by entry."""
    for entry in sorted(os.scandir(top), key=lambda e: e.name):
        name = f"{rel}/{entry.name}"
        if entry.is_symlink():
            paths.append(name)
        elif entry.is_dir() and (entry.name == ".bin" or entry.name.startswith("@")):
            _hoisted(entry.path, name, install, paths, links)
        else:
            links.append((name, f"{install}/{name}"))


def with_bins(command: str, project_dir: str) -> str:
    """`command` with the project's and the workspace root's node_modules/.bin ahead on PATH, as
    they are here (the worker's working directory is the project's, wherever its root is)."""
    up = "/".join([".."] * len([p for p in project_dir.split("/") if p]))
    bins = ["$PWD/node_modules/.bin"] + ([f"$PWD/{up}/node_modules/.bin"] if up else [])
    return f'PATH="{":".join(bins)}:$PATH"; export PATH\n{command}'


# Node, given the workers' install, the input root and the build info files the command wrote:
# each file's paths into the install (tsc records the real path of every file it read, relative
# to the file, and the store's link resolves into the install) rewritten to the same path under
# the input root, where they are in this workspace. Only whole JSON strings' heads are replaced.
_REBASE_JS = (
    'const fs=require("fs"),p=require("path");'
    "const[i,u,...fs_]=process.argv.slice(1);let I,R;"
    "try{I=fs.realpathSync(i);R=fs.realpathSync(u)}catch(e){process.exit(0)}"
    "for(const f of fs_){const d=p.dirname(fs.realpathSync(f)),w=p.relative(d,I),l=p.relative(d,R);"
    'const a=\'"\'+w+"/",b=\'"\'+(l?l+"/":""),t=fs.readFileSync(f,"utf8");'
    "if(w&&t.includes(a))fs.writeFileSync(f,t.split(a).join(b))}"
)


def rebasing_build_info(
    command: str, project_dir: str, install: str, roots: tuple[str, ...]
) -> str:
    """`command`, then (when it succeeded, wrote a `*.tsbuildinfo` under the output roots and the
    worker has `node`) its build info's paths into `install` rewritten to the input root's
    (docs/remote-execution.md, "Build info"): the file then names the files a local build names
    (its bytes may still differ in tsc's order, which follows absolute paths), so the next `tsc -b`
    here stays incremental. The command's exit status is kept;
    the rewrite never fails the task."""
    import shlex

    q = shlex.quote
    up = "/".join([".."] * len([p for p in project_dir.split("/") if p])) or "."
    where = " ".join(q(r) for r in sorted({r or "." for r in roots})) or "."
    return (
        f"/bin/sh -c {q(command)} || exit $?\n"
        "command -v node >/dev/null 2>&1 || exit 0\n"
        f"find {where} -name node_modules -prune -o -type f -name '*.tsbuildinfo' "
        f"-exec node -e {q(_REBASE_JS)} {q(install)} {q(up)} {{}} + 2>/dev/null\n"
        "exit 0"
    )
