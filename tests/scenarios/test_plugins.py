"""The plugin seam (docs/plugins.md): plugins a workspace declares in vx.workspace, loaded by
module or entry point, checked as they load, called at their points of a real run, and each
failure kept to its plugin. Real git, real node, real `vx` processes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from support.plugins import assert_failed_in_one_line, plugin_workspace, throwing
from support.workspace import SRC, build_task, npm_workspace

R = "def plugin(o):\n    return "  # a plugin module returning what follows
STAMP_KEY = """
from pathlib import Path

def plugin(options):
    def key(task, ctx):
        stamp = Path(ctx.root) / "stamp.txt"
        return {"stamp": stamp.read_text() if stamp.exists() else ""}
    return {"key": key}
"""


def workspace(repo, plugins, modules=None, pkgs=None, ignore=("stamp.txt", "*.log")):
    return plugin_workspace(repo, plugins, modules, pkgs, ignore=ignore)


def timed(repo, *args):
    """`vx run build` with the stage table, so a replay from a receipt shows (`receipt check`)."""
    result = repo.vx("run", *(args or ("build",)), summary=False, env={"VX_TIMING": "1"})
    assert result.code == 0, result.err
    return result, "receipt check" in result.err


@pytest.mark.feature("PL-02", "KEY-11")
def test_what_a_key_hook_returns_is_in_the_key_and_no_receipt_skips_it(repo):
    """A key hook's material is in the task key: a changed value misses, the same value hits —
    even on the runs a receipt would otherwise have replayed without calling the hook (issue:
    plugins, key hooks keyed and never skipped by the warm path)."""
    workspace(repo, ["stampkey"], {"stampkey": STAMP_KEY})
    (repo.root / "stamp.txt").write_text("one")
    first, _ = timed(repo)
    assert "0 cached" in first.err
    for _ in range(2):  # the second of these would be a replay without plugins
        again, replayed = timed(repo)
        assert "1 cached" in again.err and not replayed, again.err
    (repo.root / "stamp.txt").write_text("two")
    moved, replayed = timed(repo)
    assert "0 cached" in moved.err and not replayed, moved.err
    why = repo.vx("why", "a#build", summary=False)
    assert "plugin" in why.out and "stampkey/stamp" in why.out, why.out
    (repo.root / "stamp.txt").write_text("one")
    back, _ = timed(repo)
    assert "1 cached" in back.err, back.err  # the first key's entry, served again


@pytest.mark.feature("PL-02")
def test_a_key_hook_returning_nothing_keys_as_without_plugins(tmp_path):
    """A key hook that declines (None) leaves every key as it is without any plugin (issue:
    plugins, a workspace pays nothing for a plugin that adds nothing)."""
    from support.workspace import Repo

    keys = []
    for name, plugins in (("plain", []), ("declining", ["nokey"])):
        repo = Repo(tmp_path / name)
        repo.root.mkdir()
        nokey = "def plugin(options):\n    return {'key': lambda task, ctx: None}\n"
        workspace(repo, plugins, {"nokey": nokey})
        result = repo.vx("run", "build")
        assert result.code == 0, result.err
        keys.append(result.task("a#build")["hash"])
    assert keys[0] == keys[1]


@pytest.mark.feature("PL-03")
@pytest.mark.parametrize("hook", ["key", "setup", "config", "schedule"])
def test_a_throw_in_a_shaping_hook_fails_the_run_in_one_line(repo, hook):
    """A throw in a shaping hook fails the run before anything runs, in one line naming the
    plugin and the hook, exit 2 (issue: plugins, failure isolation)."""
    args = {"key": "task, ctx", "setup": "ctx", "config": "ws, ctx", "schedule": "tasks, ctx"}
    workspace(repo, ["boom"], {"boom": throwing(hook, args[hook])})
    result = assert_failed_in_one_line(repo, hook)
    assert "built" not in result.out


@pytest.mark.feature("PL-03")
def test_an_observer_that_throws_is_warned_once_and_the_run_goes_on(repo):
    """A telemetry sink that throws (or calls sys.exit) is warned once and switched off; a
    throwing `admit` admits from then on; the run succeeds (issue: plugins, observers never fail
    a build)."""
    code = (
        "import sys\n"
        "def plugin(options):\n"
        "    def sink(event):\n        raise ValueError('sink broke')\n"
        "    def admit(task, running, ctx):\n        raise KeyError('admit broke')\n"
        "    def setup(ctx):\n        ctx.on(lambda event: sys.exit(3))\n"
        "    return {'telemetry': lambda ctx: sink, 'admit': admit, 'setup': setup}\n"
    )
    pkgs = {n: {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": n}} for n in "abc"}
    workspace(repo, ["flaky"], {"flaky": code}, pkgs)
    result = repo.vx("run", "build")
    assert result.code == 0, result.err
    assert result.err.count("plugin 'flaky' failed in its `telemetry` hook: ValueError") == 1
    assert "switched off for this run" in result.err
    assert result.err.count("failed in its `setup: ctx.on` hook: SystemExit: 3") == 1  # no exit
    assert result.err.count("plugin 'flaky' failed in its `admit` hook: KeyError") <= 1
    assert {t["status"] for t in result.summary["tasks"]} == {"success"}


@pytest.mark.feature("PL-01")
@pytest.mark.parametrize(
    "modules,plugins,words,hint",
    [
        ({"p": R + "{'kee': lambda t, c: None}\n"}, ["p"], "`kee` is not a hook", "did you mean `key`?"),
        ({"p": R + "{}\n"}, ["p"], "plugin 'p' has no hooks", "at least one hook"),
        ({"p": R + "{'name': 'x', 'key': len}\n"}, ["p"], "plugin 'p' sets `name`", "drop the `name` key"),
        ({"p": R + "{'key': 3}\n"}, ["p"], "`key` must be a function", "def key"),
        ({"p": R + "'key'\n"}, ["p"], "not a dict of hooks", "return e.g."),
        ({"p": "x = 1\n"}, ["p"], "plugin 'p' has no `plugin` function", "def plugin(options)"),
        ({"p": "import no_such_module_here\n"}, ["p"], "plugin 'p' failed to load: ModuleNotFoundError", "VX_DEBUG=1"),
        ({}, ["no_such_plugin"], "is neither an importable module nor a `vx.plugins` entry point", "install"),
        ({"p": R + "{'commands': {'run': {'run': len}}}\n"}, ["p"], "verb `run`, which is vx's own", "something vx"),
        (
            {v: R + "{'commands': {'hi': {'run': len}}}\n" for v in ("p", "q")},
            ["p", "q"],
            "plugins 'p' and 'q' both add the verb `hi`",
            "keep one",
        ),
    ],
)  # fmt: skip
def test_a_plugin_that_breaks_the_contract_is_refused_as_it_loads(
    repo, modules, plugins, words, hint
):
    """Validation at load: unknown hook keys (with a hint), no capability, a name override,
    non-function hooks, two plugins claiming one verb, core verbs (issue: plugins, validation)."""
    workspace(repo, plugins, modules)
    result = repo.vx("run", "build", summary=False)
    assert result.code == 2, result.err
    assert words in result.err, result.err
    assert any(line.startswith("hint: ") and hint in line for line in result.err.splitlines())
    assert "Traceback" not in result.err


@pytest.mark.feature("PL-02", "CLI-15", "CLI-08")
def test_a_plugin_verb_runs_with_its_arguments_and_exit_code(repo):
    """A verb core does not know goes to the declared plugins; its return value is the exit
    code, and `vx help` lists it; a verb nobody adds is still refused; `vx info` names each
    plugin and its hooks (issue: plugins, verbs)."""
    code = (
        "def plugin(options):\n"
        "    def run(argv, ctx):\n        print('greet', *argv, ctx.root.name)\n        return 7\n"
        "    return {'commands': {'greet': {'description': 'say hello', 'run': run}}}\n"
    )
    workspace(repo, ["greeter"], {"greeter": code})
    result = repo.vx("greet", "a", "b", summary=False)
    assert result.code == 7 and result.out == "greet a b ws\n", result.err
    helped = repo.vx("help", summary=False)
    assert "Plugin commands:" in helped.out and "greet  say hello (plugin greeter)" in helped.out
    unknown = repo.vx("gret", summary=False)
    assert unknown.code == 2 and "gret" in unknown.err
    helped = repo.vx("help", "greet", summary=False)
    assert helped.code == 0 and helped.out == "vx greet: say hello (plugin greeter)\n", helped.err
    info = repo.vx("info", summary=False)
    assert re.search(r"^plugins +greeter \(commands\)$", info.out, re.M), info.out


@pytest.mark.feature("PL-02")
def test_a_config_hook_edits_the_workspace_config_and_is_validated_again(repo):
    """A `config` hook's edit is what the run uses, and a wrong edit is refused as the file's
    would be, naming the plugin (issue: plugins, config hook)."""
    code = (
        "def plugin(options):\n"
        "    def config(ws, ctx):\n        ws['cacheDir'] = options['dir']\n        return ws\n"
        "    return {'config': config}\n"
    )
    workspace(repo, [{"name": "cachedir", "options": {"dir": "elsewhere"}}], {"cachedir": code})
    result = repo.vx("run", "build", summary=False)
    assert result.code == 0, result.err
    assert any((repo.root / "elsewhere").iterdir())
    bad = {"plugins": [{"name": "cachedir", "options": {"dir": 5}}]}
    repo.write({"vx.workspace.json": bad}).commit()
    refused = repo.vx("run", "build", summary=False)
    assert refused.code == 2 and "as plugin 'cachedir' left it" in refused.err, refused.err
    assert "cacheDir" in refused.err


@pytest.mark.feature("PL-02", "GR-14", "GR-13")
def test_schedule_weighs_the_order_and_admit_holds_tasks_apart(repo):
    """`schedule` weights decide which ready task starts first; `admit` that holds a task while
    another runs makes them run one at a time even with free slots (issue: plugins, schedule
    and admit hooks)."""
    order = (
        "def plugin(options):\n"
        "    def schedule(tasks, ctx):\n"
        "        return {t.id: options['weights'].get(t.project, 0) for t in tasks}\n"
        "    def admit(task, running, ctx):\n        return not running\n"
        "    return {'schedule': schedule, 'admit': admit}\n"
    )
    log = repo.root.parent / "order.log"

    def build(n):
        step = f"echo {n}:{{}} >> {log}"
        command = (
            f"{step.format('start')} && mkdir -p dist && cp src/a.js dist/ && {step.format('end')}"
        )
        return build_task(deps=(), command=command)

    pkgs = {n: {"tasks": {"build": build(n)}, "files": {"src/a.js": n}} for n in "abc"}
    plugins = [{"name": "order", "options": {"weights": {"a": 1, "b": 3, "c": 2}}}]
    workspace(repo, plugins, {"order": order}, pkgs)
    result = repo.vx("run", "build", "--concurrency=3")
    assert result.code == 0, result.err
    steps = log.read_text().split()
    # highest weight first, and held apart: each command ended before the next began
    assert steps == ["b:start", "b:end", "c:start", "c:end", "a:start", "a:end"], steps


@pytest.mark.feature("PL-02")
def test_setup_subscribes_and_teardown_runs_once_and_is_bounded(repo):
    """`setup` subscribes to the run's events through ctx.on; `teardown` runs at the end; one that
    never returns holds the run's end for its bound only (issue: plugins, setup/teardown)."""
    code = (
        "import sys, threading\n"
        "def plugin(options):\n"
        "    seen = []\n"
        "    def setup(ctx):\n        ctx.on(seen.append)\n"
        "    def teardown(ctx):\n"
        "        print('teardown saw', len(seen) > 0, file=sys.stderr, flush=True)\n"
        "        if options.get('hang'):\n            threading.Event().wait()\n"
        "    return {'setup': setup, 'teardown': teardown}\n"
    )
    workspace(repo, ["life"], {"life": code})
    result = repo.vx("run", "build", summary=False)
    assert result.code == 0 and result.err.count("teardown saw True") == 1, result.err
    repo.write({"vx.workspace.json": {"plugins": [{"name": "life", "options": {"hang": True}}]}})
    repo.commit()
    hung = repo.vx("run", "build", summary=False)
    assert hung.code == 0, hung.err
    assert "its `teardown` hook did not end within 3 s" in hung.err


@pytest.mark.feature("PL-01")
def test_an_entry_point_names_a_plugin(repo, tmp_path):
    """A name that is no module is looked up as a `vx.plugins` entry point of an installed
    distribution (issue: plugins, loaded by entry point)."""
    site = tmp_path / "site"
    (site / "greet_pkg").mkdir(parents=True)
    (site / "greet_pkg" / "__init__.py").write_text(
        "def plugin(options):\n"
        "    return {'commands': {'hey': {'run': lambda argv, ctx: print('hey from ep')}}}\n"
    )
    dist = site / "greet_pkg-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: greet-pkg\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[vx.plugins]\ngreet-ep = greet_pkg\n")
    workspace(repo, ["greet-ep"])
    result = repo.vx("hey", summary=False, env={"PYTHONPATH": f"{SRC}{os.pathsep}{site}"})
    assert result.code == 0 and result.out == "hey from ep\n", result.err


@pytest.mark.feature("PL-03")
def test_a_workspace_without_plugins_never_imports_the_seam(repo):
    """No plugins declared: a run (and its warm rerun) imports nothing of the plugin seam
    (issue: plugins, a workspace with no plugins pays nothing)."""
    pkgs = {"a": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A;"}}}
    repo.write(npm_workspace(pkgs)).commit()
    probe = (
        "import sys\nfrom vx.cli.main import main\ncode = main(['run', 'build'])\n"
        "print(code, any(m.startswith('vx.plugins') for m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VX_", "CI"))}
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=repo.root,
            env={**env, "PYTHONPATH": SRC},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.stdout.splitlines()[-1] == "0 False", proc.stderr


@pytest.mark.feature("PL-02")
def test_a_project_hook_adds_and_edits_tasks_validated_again(repo):
    """A `project` hook adds a task to a package with no vx config and edits a declared one, and
    `vx show` shows what the run ran; what it returns is validated as a config file, the refusal
    naming the plugin (issue: plugins, project hook)."""
    code = (
        "def plugin(options):\n"
        "    def project(project, config, ctx):\n"
        "        tasks = config.setdefault('tasks', {})\n"
        "        if project.name == 'bare':\n"
        "            tasks['hello'] = {'exec': {'command': options['command']}}\n"
        "        elif project.name == 'a':\n"
        "            tasks['hello'] = {'exec': {'command': 'echo edited-a'}}\n"
        "        return config\n"
        "    return {'project': project}\n"
    )
    pkgs = {
        "a": {"tasks": {"hello": {"exec": {"command": "echo declared-a"}}}},
        "bare": {},  # a package.json and nothing else
    }
    entry = {"name": "tasks", "options": {"command": "echo added-bare"}}
    workspace(repo, [entry], {"tasks": code}, pkgs)
    result = repo.vx("run", "hello", "--output-logs=full")
    assert result.code == 0, result.err
    assert set(result.statuses()) == {"a#hello", "bare#hello"}
    assert (
        "edited-a" in result.out and "added-bare" in result.out and "declared-a" not in result.out
    )
    shown = repo.vx("show", "bare#hello", "--format", "json", summary=False)
    assert shown.code == 0 and "echo added-bare" in shown.out, shown.err  # as the run saw it
    entry["options"]["command"] = ""  # an empty command: refused as the file's would be
    repo.write({"vx.workspace.json": {"plugins": [entry]}}).commit()
    refused = repo.vx("run", "hello", summary=False)
    assert refused.code == 2, refused.err
    assert "packages/bare/package.json (as plugin 'tasks' left it)" in refused.err, refused.err


@pytest.mark.feature("PL-02")
def test_a_graph_hook_adds_an_edge_and_a_cycle_is_refused(repo):
    """A `graph` hook's added edge orders the tasks and is in the dependant's key; an edge that
    closes a cycle is refused naming the plugin (issue: plugins, graph hook)."""
    log = repo.root.parent / "order.log"
    code = (
        "def plugin(options):\n"
        "    def graph(edges, requested, ctx):\n"
        "        for task, dep in options['edges']:\n"
        "            edges[task].append(dep)\n"
        "        return edges, requested\n"
        "    return {'graph': graph}\n"
    )

    def build(n):
        return build_task(
            deps=(), command=f"echo {n} >> {log} && mkdir -p dist && cp src/a.js dist/"
        )

    pkgs = {n: {"tasks": {"build": build(n)}, "files": {"src/a.js": n}} for n in "ab"}
    entry = {"name": "edges", "options": {"edges": [["a#build", "b#build"]]}}
    workspace(repo, [entry], {"edges": code}, pkgs)
    result = repo.vx("run", "build")
    assert result.code == 0, result.err
    assert log.read_text().split() == ["b", "a"]  # a waits for b now
    keyed = result.task("a#build")["hash"]
    entry["options"]["edges"] = []
    repo.write({"vx.workspace.json": {"plugins": [entry]}}).commit()
    plain = repo.vx("run", "build")
    assert plain.task("a#build")["hash"] != keyed  # the edge was in a's key
    entry["options"]["edges"] = [["a#build", "b#build"], ["b#build", "a#build"]]
    repo.write({"vx.workspace.json": {"plugins": [entry]}}).commit()
    cycle = repo.vx("run", "build", summary=False)
    assert cycle.code == 2 and "plugin 'edges': after its `graph` hook" in cycle.err, cycle.err
    assert "cycle" in cycle.err


@pytest.mark.feature("PL-02")
@pytest.mark.parametrize(
    "found,words",
    [
        ([{"dir": "tools/gen", "name": "gen"}], None),
        ([{"dir": "../elsewhere", "name": "x"}], "is not inside the workspace"),
        ([{"dir": "tools/none", "name": "x"}], "does not exist"),
        ([{"dir": "packages/a", "name": "x"}], "already a project's directory"),
        ([{"dir": "tools/gen", "name": "a"}], "already named 'a'"),
        ([{"dir": "tools/gen"}], "gave {'dir': 'tools/gen'}"),
    ],
)
def test_a_discover_hook_adds_projects_inside_the_workspace_only(repo, found, words):
    """A `discover` hook adds a project the package manager does not list; a directory outside
    the workspace, missing or taken, or a name taken, is refused naming the plugin (issue:
    plugins, discover hook)."""
    code = f"def plugin(options):\n    return {{'discover': lambda ctx: {found!r}}}\n"
    workspace(repo, ["finder"], {"finder": code})
    gen = {"tasks": {"build": {"exec": {"command": "echo generating"}}}}
    repo.write({"tools/gen/vx.config.json": gen}).commit()
    result = repo.vx("run", "build", "--output-logs=full")
    if words is None:
        assert result.code == 0, result.err
        assert set(result.statuses()) == {"a#build", "gen#build"} and "generating" in result.out
    else:
        assert result.code == 2 and "plugin 'finder': its `discover` hook" in result.err
        assert words in result.err, result.err


@pytest.mark.feature("PL-03", "EX-04")
def test_a_secret_a_plugin_quotes_in_a_failure_or_a_warning_is_masked(repo):
    """What a plugin raises or warns is masked as task output is: a secret value of the
    environment shows as *** (issue: plugins, failure lines never leak a token)."""
    code = (
        "def plugin(options):\n"
        "    def setup(ctx):\n        ctx.warn('using ' + ctx.env['DEPLOY_TOKEN'])\n"
        "    def key(task, ctx):\n"
        "        if options.get('fail'):\n"
        "            raise RuntimeError('bad token ' + ctx.env['DEPLOY_TOKEN'])\n"
        "    return {'setup': setup, 'key': key}\n"
    )
    workspace(repo, ["leaky"], {"leaky": code})
    env = {"DEPLOY_TOKEN": "hunter2hunter2"}
    warned = repo.vx("run", "build", summary=False, env=env)
    assert warned.code == 0 and "plugin 'leaky': using ***" in warned.err, warned.err
    repo.write({"vx.workspace.json": {"plugins": [{"name": "leaky", "options": {"fail": True}}]}})
    result = repo.vx("run", "build", summary=False, env=env)
    assert result.code == 2 and "bad token ***" in result.err, result.err
    assert "hunter2" not in warned.err + warned.out + result.err + result.out


SHELF = """
import os
from pathlib import Path

class Shelf:
    def __init__(self, where, broken):
        self.where, self.broken = Path(where), broken
        self.where.mkdir(parents=True, exist_ok=True)
    def has(self, key):
        if self.broken:
            raise OSError("the shelf is gone")
        return (self.where / key).is_file()
    def get(self, key):
        if self.broken:
            raise OSError("the shelf is gone")
        return (self.where / key).read_bytes()
    def put(self, key, data):
        (self.where / key).write_bytes(data)

def plugin(options):
    return {"cache": lambda ctx: Shelf(options["dir"], options.get("broken", False))}
"""


@pytest.mark.feature("PL-02", "PL-04", "RC-07")
def test_a_cache_hook_is_the_remote_layer_and_a_broken_one_is_a_miss(repo, tmp_path):
    """A `cache` hook's layer gets each new entry and serves it to a run whose local cache is
    gone; a layer that throws costs a warning and a miss, never the build (issue: plugins, cache
    factory)."""
    import shutil

    shelf = tmp_path / "shelf"
    entry = {"name": "shelf", "options": {"dir": str(shelf)}}
    workspace(repo, [entry], {"shelf": SHELF})
    env = {"VX_SHARED_STORE": "0"}
    first = repo.vx("run", "build", env=env)
    assert first.code == 0 and first.statuses()["a#build"] == ("success", "miss"), first.err
    key = first.task("a#build")["hash"]
    assert (shelf / key).is_file()  # uploaded
    shutil.rmtree(repo.root / ".vx" / "cache")
    shutil.rmtree(repo.root / "packages/a/dist")
    second = repo.vx("run", "build", env=env)
    assert second.statuses()["a#build"] == ("success", "remote"), second.err
    assert (repo.root / "packages/a/dist/out.js").read_text() == "A;"
    entry["options"]["broken"] = True
    repo.write({"vx.workspace.json": {"plugins": [entry]}}).commit()
    shutil.rmtree(repo.root / ".vx" / "cache")
    broken = repo.vx("run", "build", env=env)
    assert broken.code == 0 and broken.statuses()["a#build"] == ("success", "miss"), broken.err
    assert "plugin 'shelf' failed in its cache's `get`: OSError: the shelf is gone" in broken.err


def two_shelves(repo, tmp_path):
    """A workspace with two plugin cache layers, each a directory of entries: (first, second)."""
    one, two = tmp_path / "one", tmp_path / "two"
    plugins = [
        {"name": "shelf", "options": {"dir": str(one)}},
        {"name": "shelf2", "options": {"dir": str(two)}},
    ]
    workspace(repo, plugins, {"shelf": SHELF, "shelf2": SHELF})
    return one, two


@pytest.mark.feature("PL-02", "PL-04")
def test_cache_layers_chain_in_declaration_order_before_the_local_floor(repo, tmp_path):
    """Two plugins' cache layers are both asked: a save reaches each, and an entry only the
    second one holds is served (issue: plugins, cache plugins chain rather than the first one
    winning)."""
    import shutil

    one, two = two_shelves(repo, tmp_path)
    env = {"VX_SHARED_STORE": "0"}
    first = repo.vx("run", "build", env=env)
    assert first.code == 0 and first.statuses()["a#build"] == ("success", "miss"), first.err
    key = first.task("a#build")["hash"]
    assert (one / key).is_file() and (two / key).is_file()  # saved to both layers
    (one / key).unlink()
    shutil.rmtree(repo.root / ".vx" / "cache")
    shutil.rmtree(repo.root / "packages/a/dist")
    second = repo.vx("run", "build", env=env)
    assert second.statuses()["a#build"] == ("success", "remote"), second.err
    assert (repo.root / "packages/a/dist/out.js").read_text() == "A;"


@pytest.mark.feature("PL-02", "PL-04")
def test_a_hit_a_later_layer_serves_is_copied_back_to_the_earlier_ones(repo, tmp_path):
    """An entry only the second plugin layer holds is served, and copied back to the first
    layer in the background before vx exits, so the next run finds it in the first layer it
    asks — as a remote hit lands in the local cache (issue: plugins, a later layer's hit was
    not copied back to earlier plugin layers)."""
    import shutil

    one, two = two_shelves(repo, tmp_path)
    env = {"VX_SHARED_STORE": "0"}
    key = repo.vx("run", "build", env=env).task("a#build")["hash"]
    (one / key).unlink()
    shutil.rmtree(repo.root / ".vx" / "cache")
    second = repo.vx("run", "build", env=env)
    assert second.statuses()["a#build"] == ("success", "remote"), second.err
    assert (one / key).read_bytes() == (two / key).read_bytes()  # copied back, whole
    (two / key).unlink()  # now only the first layer holds it
    shutil.rmtree(repo.root / ".vx" / "cache")
    third = repo.vx("run", "build", env=env)
    assert third.statuses()["a#build"] == ("success", "remote"), third.err


@pytest.mark.feature("PL-02", "RC-07")
def test_a_dead_layer_of_the_chain_trips_its_own_breaker(repo, tmp_path):
    """A plugin layer that fails on every call, before one that holds the entries: after three
    failures in a row that layer alone is passed over for a while (said, naming it), and
    the other layer serves every task (issue: plugins, the breaker was the store's, so a dead
    layer before a live one was asked for every task)."""
    import shutil

    one, two = tmp_path / "one", tmp_path / "two"
    pkgs = {n: {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": n}} for n in "abcde"}
    plugins = [
        {"name": "shelf", "options": {"dir": str(one)}},
        {"name": "shelf2", "options": {"dir": str(two)}},
    ]
    # a missing key is a miss here, not a failure; the first one fails whenever SHELF_DEAD is set
    shelf = SHELF.replace(
        "return (self.where / key).read_bytes()",
        "return (self.where / key).read_bytes() if (self.where / key).is_file() else None",
    )
    dying = shelf.replace('options.get("broken", False)', 'bool(os.environ.get("SHELF_DEAD"))')
    workspace(repo, plugins, {"shelf": dying, "shelf2": shelf}, pkgs)
    env = {"VX_SHARED_STORE": "0"}
    assert repo.vx("run", "build", env=env).code == 0
    assert len(list(two.iterdir())) == 5
    shutil.rmtree(repo.root / ".vx" / "cache")
    result = repo.vx("run", "build", env={**env, "SHELF_DEAD": "1"})
    assert result.code == 0, result.err
    assert {c for _, c in result.statuses().values()} == {"remote"}, result.err
    said = "remote cache: plugin://shelf failed 3 times in a row; not asking it again for 30 s"
    assert said in result.err, (
        result.err
    )  # (exactly when it reopens: tests/unit/store/test_remote_chain.py)


@pytest.mark.feature("PL-02", "PL-04", "RC-02")
def test_a_configured_remote_cache_is_asked_after_a_plugin_layer(
    repo, tmp_path, turbo_server, team
):
    """A plugin's cache layer and a configured turbo remote cache are both layers: a save
    reaches each, and when the plugin's layer lacks an entry the server's is served (issue:
    plugins, a configured remote no longer hides a plugin's layer)."""
    import shutil

    shelf = tmp_path / "shelf"
    workspace(repo, [{"name": "shelf", "options": {"dir": str(shelf)}}], {"shelf": SHELF})
    config = {
        "plugins": [{"name": "shelf", "options": {"dir": str(shelf)}}],
        "remoteCache": {"turbo": {"team": team}},
    }
    repo.write({"vx.workspace.json": config}).commit()
    env = {**turbo_server.env(team), "CI": "1", "VX_SHARED_STORE": "0"}
    first = repo.vx("run", "build", env=env)
    assert first.code == 0 and first.statuses()["a#build"] == ("success", "miss"), first.err
    key = first.task("a#build")["hash"]
    assert (shelf / key).is_file() and turbo_server.artifact(team, key).is_file()
    (shelf / key).unlink()
    shutil.rmtree(repo.root / ".vx" / "cache")
    shutil.rmtree(repo.root / "packages/a/dist")
    second = repo.vx("run", "build", env=env)
    assert second.statuses()["a#build"] == ("success", "remote"), second.err
    assert (repo.root / "packages/a/dist/out.js").read_text() == "A;"
    assert any(key in r for r in turbo_server.requests("GET")), turbo_server.requests()


FARM = """
import subprocess

class Farm:
    def __init__(self, options):
        self.options = options
    def accepts(self, task):
        return task.project in self.options["projects"]
    def run(self, task, command, cwd, env, output):
        if self.options.get("broken"):
            raise ConnectionError("the farm is down")
        done = subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True)
        output("farm ran " + task.id + "\\n")
        output(done.stdout)
        return done.returncode

def plugin(options):
    return {"executor": lambda ctx: Farm(options)}
"""


@pytest.mark.feature("PL-02", "PL-04", "EX-17")
def test_an_executor_hook_runs_the_tasks_it_accepts_and_its_throw_fails_only_the_task(repo):
    """A plugin executor runs the tasks it accepts (its output is the task's, its exit code the
    task's, the outputs saved and hit as vx's own), vx runs the rest; an executor that throws
    fails that task, naming the plugin, never the run's other tasks (issue: plugins, executor
    factory)."""
    pkgs = {
        n: {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": n}} for n in ("a", "b")
    }
    entry = {"name": "farm", "options": {"projects": ["a"]}}
    workspace(repo, [entry], {"farm": FARM}, pkgs)
    first = repo.vx("run", "build", "--output-logs=full")
    assert first.code == 0, first.err
    assert "farm ran a#build" in first.out and "farm ran b#build" not in first.out
    assert (repo.root / "packages/a/dist/out.js").read_text() == "a"
    again = repo.vx("run", "build")
    assert {cache for _, cache in again.statuses().values()} == {"up-to-date"}, again.err
    entry["options"]["broken"] = True
    repo.write({"vx.workspace.json": {"plugins": [entry]}, "packages/a/src/a.js": "A2"}).commit()
    broken = repo.vx("run", "build", "--output-logs=full")
    assert broken.code == 1 and broken.statuses()["a#build"][0] == "failed", broken.err
    assert "plugin 'farm' failed in its `executor` hook: ConnectionError: the farm is down" in (
        broken.out + broken.err
    )


ELSEWHERE = """
class Elsewhere:
    \"\"\"Builds on another machine (here: writes what it built), and says with what Node.\"\"\"
    def __init__(self, options):
        self.node = options.get("node")
    def run(self, task, command, cwd, env, output):
        (cwd / "dist").mkdir(exist_ok=True)
        (cwd / "dist" / "out.js").write_text("built elsewhere with " + task.toolchain["node"])
        return 0, {"node": self.node or task.toolchain["node"]}

def plugin(options):
    return {"executor": lambda ctx: Elsewhere(options)}
"""


@pytest.mark.feature("PL-04", "EX-17")
def test_an_executor_that_reports_another_node_is_not_saved_and_vx_builds_it(repo):
    """An executor sees the toolchain the key names (`task.toolchain`) and may return it with
    the exit code: one built with another Node than the key's is not kept, the task is built
    here with one warning and that is saved; one that reports the key's own is saved as it
    built it (issue: a plugin executor's result saved under this machine's toolchain)."""
    here = subprocess.run(["node", "-v"], capture_output=True, text=True, check=True).stdout.strip()
    entry = {"name": "elsewhere", "options": {"node": "v18.20.0"}}
    workspace(repo, [entry], {"elsewhere": ELSEWHERE})
    other = repo.vx("run", "build")
    assert other.code == 0, other.err
    told = [line for line in other.err.splitlines() if "plugin 'elsewhere' built a#build" in line]
    assert len(told) == 1 and f"node v18.20.0, the key has {here}" in told[0], other.err
    assert (repo.root / "packages/a/dist/out.js").read_text() == "A;"  # vx's own build
    shutil.rmtree(repo.root / "packages/a/dist")
    hit = repo.vx("run", "build")
    assert hit.statuses()["a#build"] == ("success", "local"), hit.err
    assert (repo.root / "packages/a/dist/out.js").read_text() == "A;"

    entry["options"]["node"] = None
    repo.write({"vx.workspace.json": {"plugins": [entry]}, "packages/a/src/a.js": "B;"}).commit()
    same = repo.vx("run", "build")
    assert same.code == 0 and "built a#build with" not in same.err, same.err
    assert (repo.root / "packages/a/dist/out.js").read_text() == f"built elsewhere with {here}"


@pytest.mark.feature("PL-02", "PL-03")
def test_what_setup_warned_is_printed_before_a_planning_failure(repo):
    """A plugin's `ctx.warn` from `setup` is printed even when planning then fails, before the
    failure's line — it may be why (issue: plugins, warnings dropped when planning fails)."""
    code = R + '{"setup": lambda ctx: ctx.warn("the farm token is expired")}\n'
    workspace(repo, ["warner"], {"warner": code})
    for args in (("run", "nosuch"), ("run", "nosuch", "--dry")):
        res = repo.vx(*args, summary=False)
        assert res.code == 2, res.err
        said = "warning: plugin 'warner': the farm token is expired"
        assert said in res.err and "error:" in res.err, res.err
        assert res.err.index(said) < res.err.index("error:"), res.err


@pytest.mark.feature("PL-02", "CLI-12")
def test_completions_offer_the_verbs_a_workspaces_plugins_add(repo, tmp_path):
    """`vx completions` in a workspace whose plugins add verbs offers those verbs too; a plain
    workspace's script is the one vx prints outside any workspace (issue: plugins, completions
    without plugin verbs)."""
    outside = subprocess.run(
        [sys.executable, "-m", "vx", "completions", "bash"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=60,
    )
    workspace(repo, [])
    plain = repo.vx("completions", "bash", summary=False)
    assert plain.code == 0 and plain.out == outside.stdout, plain.err
    code = R + '{"commands": {"deploy": {"description": "ship it", "run": lambda argv, ctx: 0}}}\n'
    workspace(repo, ["shipper"], {"shipper": code})
    added = repo.vx("completions", "bash", summary=False)
    assert added.code == 0, added.err
    program = (
        'eval "$(cat)"; COMP_WORDS=(vx de); COMP_CWORD=1; _vx; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    offered = subprocess.run(
        ["bash", "-c", program], input=added.out, capture_output=True, text=True, timeout=60
    )
    assert offered.stdout.split() == ["deploy"], offered.stdout + offered.stderr
    for shell in ("zsh", "fish"):
        other = repo.vx("completions", shell, summary=False)
        assert other.code == 0 and "deploy" in other.out, other.err


STUCK = """
import threading

class Stuck:
    def accepts(self, task):
        return True
    def run(self, task, command, cwd, env, output):
        output("waiting on the farm\\n")
        threading.Event().wait()  # never set: this call never returns

def plugin(options):
    return {"executor": lambda ctx: Stuck()}
"""


@pytest.mark.feature("PL-02", "EX-05")
def test_a_plugin_executor_that_never_returns_times_out_as_a_local_task_does(repo):
    """A task's `exec.timeout` holds for a plugin's executor too: a call that never returns
    ends the task as timed out and the run with exit 1, not a run that waits forever (issue:
    plugins, an executor has no timeout of its own)."""
    task = build_task(deps=())
    task["exec"]["timeout"] = 500
    pkgs = {"a": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}}}
    workspace(repo, ["stuck"], {"stuck": STUCK}, pkgs)
    res = repo.vx("run", "build", "--output-logs=full", timeout=60)
    assert res.code == 1, res.err
    t = res.task("a#build")
    assert t["status"] == "failed" and t.get("timedOut") is True, res.summary
    assert t["exitCode"] == 143 and "waiting on the farm" in res.out, res.out


@pytest.mark.feature("PL-01", "WS-11")
def test_a_workspace_config_written_as_code_names_plugins_by_the_same_strings(repo):
    """`vx.workspace.mjs`, evaluated by Node, declares Python plugins with the same strings and
    `{name, options}` objects as vx.workspace.json (issue: plugins, configs written as code)."""
    code = (
        "def plugin(options):\n"
        "    def run(argv, ctx):\n        print('hello', options['who'])\n"
        "    return {'commands': {'hello': {'run': run}}}\n"
    )
    workspace(repo, [], {"greet": code})
    (repo.root / "vx.workspace.json").unlink()
    repo.write(
        {
            "vx.workspace.mjs": "export default { plugins: [{ name: 'greet', options: { who: 'js' } }] };\n"
        }
    ).commit()
    result = repo.vx("hello", summary=False)
    assert result.code == 0 and result.out == "hello js\n", result.err


@pytest.mark.feature("PL-02", "KEY-11")
def test_declaring_a_plugin_ends_the_replays_of_a_receipted_workspace(repo):
    """A workspace replayed from its receipt declares a key plugin: the next run goes through
    the pipeline and keys with the hook (issue: plugins, never served by a replay that skips
    a key hook)."""
    import time

    workspace(repo, [], {"stampkey": STAMP_KEY})
    (repo.root / "stamp.txt").write_text("one")
    timed(repo)
    time.sleep(0.06)  # past the racy window of what the first run wrote (as test_receipts does)
    timed(repo)
    _, replayed = timed(repo)
    assert replayed  # without plugins, the warm run is a replay
    repo.write({"vx.workspace.json": {"plugins": ["stampkey"]}}).commit()
    keyed, replayed = timed(repo)
    assert not replayed and "0 cached" in keyed.err, keyed.err


@pytest.mark.feature("CLI-02", "PL-02")
def test_a_bare_run_lists_the_tasks_a_plugin_adds(repo):
    """A bare `vx run` lists the tasks there are to run from here, and a task a plugin's
    `project` hook adds is one as a config's task is — not "no project here declares any task"
    (issue: plugins, a bare run ignored plugin-added tasks)."""
    adds = (
        "def plugin(options):\n"
        "    def project(project, config, ctx):\n"
        "        config.setdefault('tasks', {})['lint'] = {'exec': {'command': 'true'}}\n"
        "        return config\n"
        "    return {'project': project}\n"
    )
    pkgs = {"a": {"files": {"src/a.js": "A;"}}}  # no vx.config: every task is the plugin's
    workspace(repo, ["adds"], {"adds": adds}, pkgs)
    result = repo.vx("run", cwd="packages/a", summary=False)
    assert result.code == 2, result.err
    assert "tasks: lint" in result.err and "Traceback" not in result.err, result.err
