"""The plugin seam (docs/plugins.md): plugins a workspace declares in vx.workspace, loaded by
module or entry point, checked as they load, called at their points of a real run, and each
failure kept to its plugin. Real git, real node, real `vx` processes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import SRC, build_task, npm_workspace

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
    pkgs = pkgs or {"a": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A;"}}}
    files = npm_workspace(pkgs)
    files[".gitignore"] = str(files[".gitignore"]) + "".join(f"{g}\n" for g in ignore)
    files["vx.workspace.json"] = {"plugins": plugins}
    files.update({f"{name}.py": code for name, code in (modules or {}).items()})
    repo.write(files).commit()
    return repo


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
    from conftest import Repo

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
    code = (
        f"def plugin(options):\n    def hook({args[hook]}):\n        raise RuntimeError('nope')\n"
        f"    return {{'{hook}': hook}}\n"
    )
    workspace(repo, ["boom"], {"boom": code})
    result = repo.vx("run", "build", summary=False)
    assert result.code == 2, result.err
    assert f"error: plugin 'boom' failed in its `{hook}` hook: RuntimeError: nope" in result.err
    assert "Traceback" not in result.err and "built" not in result.out
    assert not (repo.root / "packages/a/dist").exists()


@pytest.mark.feature("PL-03")
def test_an_observer_that_throws_is_warned_once_and_the_run_goes_on(repo):
    """A telemetry sink that throws is warned once and switched off; a throwing `admit` admits
    from then on; the run succeeds (issue: plugins, observers never fail a build)."""
    code = (
        "def plugin(options):\n"
        "    def sink(event):\n        raise ValueError('sink broke')\n"
        "    def admit(task, running, ctx):\n        raise KeyError('admit broke')\n"
        "    return {'telemetry': lambda ctx: sink, 'admit': admit}\n"
    )
    pkgs = {n: {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": n}} for n in "abc"}
    workspace(repo, ["flaky"], {"flaky": code}, pkgs)
    result = repo.vx("run", "build")
    assert result.code == 0, result.err
    assert result.err.count("plugin 'flaky' failed in its `telemetry` hook: ValueError") == 1
    assert "switched off for this run" in result.err
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
        ({"p": R + "{'graph': len}\n"}, ["p"], "`graph` hook is not supported yet", "dependsOn"),
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


@pytest.mark.feature("PL-02", "CLI-15")
def test_a_plugin_verb_runs_with_its_arguments_and_exit_code(repo):
    """A verb core does not know goes to the declared plugins; its return value is the exit
    code, and `vx help` lists it; a verb nobody adds is still refused (issue: plugins, verbs)."""
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
