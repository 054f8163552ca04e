"""The plugin seam's planning hooks held to the rules core keeps (docs/plugins.md): a project a
`discover` hook adds is checked as a member package is, a throw in any planning hook or factory
fails the run naming plugin and hook, and a `project` hook that changes what a task runs changes
its key. Real git, real node, real `vx` processes."""

from __future__ import annotations

import os

import pytest
from support.plugins import assert_failed_in_one_line, plugin_workspace, throwing
from support.workspace import build_task


def workspace(repo, plugins, modules, pkgs=None, extra=None):
    return plugin_workspace(repo, plugins, modules, pkgs, ignore=("cmd.txt",), extra=extra)


DISCOVER = """
def plugin(options):
    return {"discover": lambda ctx: [{"dir": options["dir"], "name": options["name"]}]}
"""
GEN = {"tasks": {"build": build_task(deps=())}}


@pytest.mark.feature("PL-02", "WS-02")
@pytest.mark.parametrize("where", ["outside", "outside/gen", "inside"])
def test_a_discovered_project_reached_through_a_symlink_is_refused(repo, where):
    """A directory a `discover` hook names through a symlink — one out of the workspace, or one
    to another of its directories — is refused as a linked member is: a project's outputs would
    be walked, wiped and restored through the link (issue: plugins, discover validated, no
    symlink escape)."""
    away = repo.root.parent / f"{repo.root.name}-away"
    (away / "gen/src").mkdir(parents=True)
    (away / "gen/vx.config.json").write_text('{"tasks": {}}')
    entry = {"name": "disc", "options": {"dir": where, "name": "gen"}}
    workspace(repo, [entry], {"disc": DISCOVER}, extra={"tools/gen/vx.config.json": GEN})
    os.symlink(away, repo.root / "outside")
    os.symlink(repo.root / "tools/gen", repo.root / "inside")
    result = repo.vx("run", "build", summary=False)
    assert result.code == 2, result.err
    assert "plugin 'disc': its `discover` hook adds a project" in result.err, result.err
    assert "symlink" in result.err and "Traceback" not in result.err
    assert not (repo.root / "packages/a/dist").exists()


@pytest.mark.feature("PL-02", "WS-03")
@pytest.mark.parametrize("name", ["gen#x", " gen", "gen\n"])
def test_a_discovered_project_is_named_as_a_package_must_be(repo, name):
    """A discovered project's name follows a package name's rules — no `#` (it separates a
    project from its task), no surrounding whitespace — refused naming the plugin (issue:
    plugins, discover validated)."""
    entry = {"name": "disc", "options": {"dir": "tools/gen", "name": name}}
    workspace(repo, [entry], {"disc": DISCOVER}, extra={"tools/gen/vx.config.json": GEN})
    result = repo.vx("run", "build", summary=False)
    assert result.code == 2, result.err
    assert "plugin 'disc': its `discover` hook adds a project" in result.err, result.err
    assert "hint: name it as a package is named" in result.err, result.err
    assert "Traceback" not in result.err
    assert not (repo.root / "packages/a/dist").exists()


@pytest.mark.feature("PL-03")
@pytest.mark.parametrize(
    "hook,args",
    [
        ("discover", "ctx"),
        ("project", "project, config, ctx"),
        ("graph", "edges, requested, ctx"),
        ("executor", "ctx"),
        ("cache", "ctx"),
    ],
)
def test_a_throw_in_a_planning_hook_or_a_factory_fails_the_run_in_one_line(repo, hook, args):
    """A throw in `discover`, `project`, `graph`, or the `executor` and `cache` factories fails
    the run before anything runs, in one line naming the plugin and the hook, exit 2 (issue:
    plugins, failure isolation)."""
    workspace(repo, ["boom"], {"boom": throwing(hook, args)})
    assert_failed_in_one_line(repo, hook)


EMIT = """
from pathlib import Path

def plugin(options):
    def project(project, config, ctx):
        if project.name != "c":
            return None
        text = (ctx.root / "cmd.txt").read_text().strip()
        config.setdefault("tasks", {})["emit"] = {
            "exec": {"command": f"node -e \\"require('fs').writeFileSync('out.txt', '{text}')\\""},
            "cache": {"inputs": {"files": ["src/**"]}, "outputs": {"files": ["out.txt"]}},
        }
        return config
    return {"project": project}
"""


@pytest.mark.feature("PL-02", "KEY-02")
def test_a_project_hook_that_changes_a_command_changes_the_key(repo):
    """A cached task a `project` hook gives a package without a config hits while the hook
    writes the same command, and misses — and runs the new one — once it writes another
    (issue: plugins, a hook that changes what a task runs changes its key)."""
    workspace(repo, ["emit"], {"emit": EMIT}, {"c": {"files": {"src/c.js": "C;"}}})
    out = repo.root / "packages/c/out.txt"
    (repo.root / "cmd.txt").write_text("one")
    first = repo.vx("run", "c#emit")
    assert first.code == 0 and first.task("c#emit")["cache"] == "miss", first.err
    assert out.read_text() == "one"
    again = repo.vx("run", "c#emit")
    assert again.code == 0 and again.task("c#emit")["cache"] != "miss", again.err
    (repo.root / "cmd.txt").write_text("two")
    moved = repo.vx("run", "c#emit")
    assert moved.code == 0 and moved.task("c#emit")["cache"] == "miss", moved.err
    assert out.read_text() == "two"


EDGES = """
def plugin(options):
    def graph(edges, requested, ctx):
        for task, dep in options["edges"]:
            edges[task].append(dep)
        return edges, requested
    return {"graph": graph}
"""


@pytest.mark.feature("PL-02", "GR-19")
def test_an_edge_onto_a_terminal_holder_a_graph_hook_adds_is_refused(repo):
    """After a `graph` hook the builder's checks run again: an edge that makes a task wait for a
    persistent interactive task — which holds the terminal until the run ends, so the task could
    never start — is refused before anything runs, as the same dependsOn is (issue: plugins,
    graph results re-checked)."""
    mark = "node -e \"require('fs').writeFileSync('../../ran-'+process.env.VX_RUN_TASK,'')\" && "
    pkgs = {
        "a": {
            "tasks": {
                "build": build_task(deps=(), command=mark + "echo built"),
                "repl": {
                    "exec": {
                        "command": mark + 'node -e "setTimeout(() => {}, 20000)"',
                        "interactive": True,
                        "persistent": {},
                    }
                },
            },
            "files": {"src/a.js": "A;"},
        }
    }
    entry = {"name": "edges", "options": {"edges": [["a#build", "a#repl"]]}}
    workspace(repo, [entry], {"edges": EDGES}, pkgs)
    result = repo.vx("run", "a#build", "a#repl", summary=False)
    assert result.code == 2, result.err
    assert "`a#build` depends on `a#repl`, which is persistent and interactive" in result.err
    assert "plugin 'edges'" in result.err and "Traceback" not in result.err
    assert not list(repo.root.glob("ran-*")), "a task started before the refusal"


@pytest.mark.feature("PL-02", "OBS-06", "OBS-07")
def test_the_cache_dir_a_config_hook_sets_is_where_why_last_and_cache_look(repo):
    """A `config` hook that sets `cacheDir` moves the run's cache and history there; `vx why`,
    `vx last`, `vx info` and `vx cache prune` read the workspace config as the run did, so they
    find them (issue: plugins, every run remembered and explained)."""
    code = (
        "def plugin(options):\n"
        "    def config(ws, ctx):\n        ws['cacheDir'] = 'elsewhere'\n        return ws\n"
        "    return {'config': config}\n"
    )
    workspace(repo, ["moved"], {"moved": code}, extra={".gitignore": "dist/\nelsewhere/\n"})
    run = repo.vx("run", "a#build", summary=False)
    assert run.code == 0, run.err
    assert (repo.root / "elsewhere").is_dir() and not (repo.root / ".vx").exists()
    why = repo.vx("why", "a#build", summary=False)
    assert why.code == 0 and "one key recorded" in why.out, why.out + why.err
    last = repo.vx("last", summary=False)
    assert last.code == 0 and "a#build" in last.out, last.out + last.err
    info = repo.vx("info", summary=False)
    assert f"{repo.root / 'elsewhere'}" in info.out, info.out + info.err
    prune = repo.vx("cache", "prune", "--dry-run", "--max-size", "1B", summary=False)
    assert prune.code == 0 and "would prune 1 entry" in prune.out, prune.out + prune.err
