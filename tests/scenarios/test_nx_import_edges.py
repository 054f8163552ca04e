"""Nx's import edges in a workspace whose nx.json declares no `plugins` (TL-05): Nx's built-in JS
analysis still makes an edge from a source import — a tsconfig path alias, or a bare import of
another workspace package's name that no package.json declares — and `^build` and `^default`
follow it. vx asks the workspace's own Nx (21.6.4, pinned) for those edges as it does where
plugins are declared; the real Nx's task graph and its cache verdicts are the oracle, never a
list written here."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from support.corpora import tool_env
from support.npm_packages import bundle_or_skip
from support.nx import OFFLINE, link_modules, nx_cli

HERE = Path(__file__).resolve().parent

TIMEOUT = 300  # a cold run loads Nx on a loaded machine
BUILD = {  # writes {projectRoot}/dist/out.js
    "command": "node -e \"const fs = require('fs'); fs.mkdirSync('{projectRoot}/dist', "
    "{recursive: true}); fs.writeFileSync('{projectRoot}/dist/out.js', '1')\""
}


@pytest.fixture(scope="module")
def nx_modules():
    # nx, @nx/js and typescript: what a workspace create-nx-workspace makes has installed
    return bundle_or_skip("nx-plugins")


def no_plugins_workspace(nx_json: dict | None = None) -> dict[str, object]:
    """`app` imports lib `a` through a tsconfig path alias, `bare` imports it by its package name
    (a package-manager workspace member, `exports` declared); no package.json dependency names
    it, and nx.json has no `plugins`."""
    return {
        "package.json": {
            "name": "ws",
            "private": True,
            "workspaces": ["libs/*"],
            # @nx/js among the root's dependencies: Nx analyses the sources' imports
            "devDependencies": {"@nx/js": "21.6.4"},
        },
        ".gitignore": "node_modules\ndist\n.nx\n.vx\n",
        "nx.json": nx_json
        or {"targetDefaults": {"build": {"dependsOn": ["^build"], "cache": True}}},
        "tsconfig.base.json": {
            "compilerOptions": {"baseUrl": ".", "paths": {"@ws/a": ["libs/a/src/index.ts"]}}
        },
        "libs/a/project.json": {"name": "a", "targets": {"build": BUILD}},
        "libs/a/package.json": {
            "name": "@ws/a-pkg",
            "version": "1.0.0",
            "exports": "./src/index.ts",
        },
        "libs/a/src/index.ts": "export const a = 1;\n",
        "apps/app/project.json": {"name": "app", "targets": {"build": BUILD}},
        "apps/app/src/main.ts": "import { a } from '@ws/a';\nconsole.log(a);\n",
        "apps/bare/project.json": {"name": "bare", "targets": {"build": BUILD}},
        "apps/bare/src/main.ts": "import { a } from '@ws/a-pkg';\nconsole.log(a);\n",
    }


def nx_task_graph(root) -> dict[str, list[str]]:
    nx_cli(root, "run-many", "-t", "build", "--graph=tg.json")
    doc = json.loads((root / "tg.json").read_text())
    (root / "tg.json").unlink()
    return {t: sorted(deps) for t, deps in doc["tasks"]["dependencies"].items()}


def vx_task_graph(ws) -> dict[str, list[str]]:
    """vx's plan by Nx's names, its implicit rows (a `^default` input's) looked through."""
    plan = ws.vx("run-many", "-t", "build", "--dry=json", timeout=TIMEOUT)
    assert plan.code == 0, plan.err
    rows = {t["id"]: t for t in json.loads(plan.out)["tasks"]}

    def through(tid: str) -> list[str]:
        return [
            d
            for dep in rows[tid]["deps"]
            for d in (through(dep) if rows[dep].get("implicit") else [dep])
        ]

    return {
        tid.replace("#", ":"): sorted({d.replace("#", ":") for d in through(tid)})
        for tid, row in rows.items()
        if not row.get("implicit")
    }


def nx_ran(root) -> set[str]:
    """The builds Nx ran rather than read from its cache."""
    out = nx_cli(root, "run-many", "-t", "build", cache=True).stdout
    return {m.group(1) for m in re.finditer(r"> nx run (\S+):build(?!\S)(?!  \[)", out)}


def nx_hash_plan(root, *targets: str) -> dict[str, list[str]]:
    """Nx's hash plan for the targets (support/nx_hash_plan.js): the entries each task folds."""
    proc = subprocess.run(
        ["node", str(HERE / "support" / "nx_hash_plan.js"), *targets],
        cwd=root,
        env=tool_env("NX_", OFFLINE),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def kept(ws) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in (ws.root / ".vx" / "nx").glob("*.json")}


@pytest.mark.feature("TL-05")
def test_an_import_edge_without_plugins_is_keyed_as_nx_keys_it(repo, nx_modules):
    repo.write(no_plugins_workspace())
    link_modules(repo.root, nx_modules)
    ws = repo.commit()
    ours, theirs = vx_task_graph(ws), nx_task_graph(ws.root)
    assert theirs["app:build"] == ["a:build"]  # the oracle has both edges
    assert theirs["bare:build"] == ["a:build"]
    assert ours == theirs  # and so the order: a's build before app's and bare's
    first = ws.vx("run-many", "-t", "build", timeout=TIMEOUT)
    assert first.code == 0, first.err + first.out
    nx_ran(ws.root)  # Nx's cache filled
    before = kept(ws)
    warm = ws.vx("run-many", "-t", "build")
    assert {s for _status, s in warm.statuses().values()} <= {"local", "up-to-date"}
    assert kept(ws) == before  # nothing changed: Nx is not asked again
    (ws.root / "libs/a/src/index.ts").write_text("export const a = 2;\n")
    missed = nx_ran(ws.root)
    assert "app" in missed  # a's source is app's input through the edge
    again = ws.vx("run-many", "-t", "build", timeout=TIMEOUT)
    assert again.code == 0, again.err + again.out
    ours_missed = {t.split("#")[0] for t, (_s, c) in again.statuses().items() if c == "miss"}
    assert ours_missed == missed


@pytest.mark.feature("TL-05")
def test_source_analysis_turned_off_in_nx_json_makes_no_edge(repo, nx_modules):
    nx_json = {
        "targetDefaults": {"build": {"dependsOn": ["^build"], "cache": True}},
        "pluginsConfig": {"@nx/js": {"analyzeSourceFiles": False}},
    }
    repo.write(no_plugins_workspace(nx_json))
    link_modules(repo.root, nx_modules)
    ws = repo.commit()
    theirs = nx_task_graph(ws.root)
    assert theirs["app:build"] == []
    assert vx_task_graph(ws) == theirs


@pytest.mark.feature("TL-05")
def test_without_nx_installed_the_files_edges_run_and_an_install_asks_nx(repo, nx_modules):
    """nx not installed: vx runs the workspace from its files (docs/config.md says why), and the
    run after `npm install` asks Nx, though the one before was replayable."""
    ws = repo.write(no_plugins_workspace()).commit()
    assert vx_task_graph(ws)["app:build"] == []
    for _ in range(2):
        run = ws.vx("run-many", "-t", "build")
        assert run.code == 0, run.err + run.out
    assert not (ws.root / ".vx" / "nx").exists()
    link_modules(ws.root, nx_modules)
    run = ws.vx("run-many", "-t", "build", timeout=TIMEOUT)
    assert run.code == 0, run.err + run.out
    assert kept(ws)  # Nx was asked
    assert vx_task_graph(ws) == nx_task_graph(ws.root)


def root_project(repo, nx_modules, gitignore: str):
    """A workspace whose one project is the root (`root:check`, cached), with `gitignore`."""
    spec = no_plugins_workspace()
    spec[".gitignore"] = gitignore
    spec["project.json"] = {
        "name": "root",
        "targets": {"check": {"command": "echo ok", "cache": True}},
    }
    repo.write(spec)
    link_modules(repo.root, nx_modules)
    return repo.commit()


@pytest.mark.feature("TL-05")
def test_nx_s_own_untracked_files_are_no_task_s_input(repo, nx_modules):
    """A repository that does not gitignore `.nx`: what Nx writes there (its graph, its cache) is
    untracked and under a root project's `{projectRoot}/**/*`, yet Nx never hashes it (its file
    walk always leaves `.nx/cache` and `.nx/workspace-data` out); nor does vx."""
    ws = root_project(repo, nx_modules, "node_modules\ndist\n.vx\n")
    nx_cli(ws.root, "run", "root:check", cache=True)  # Nx writes .nx/workspace-data and .nx/cache
    assert (ws.root / ".nx/cache").is_dir() and (ws.root / ".nx/workspace-data").is_dir()
    plan = ws.vx("run", "root:check", "--dry=json", timeout=TIMEOUT)
    assert plan.code == 0, plan.err
    ours = set(next(t for t in json.loads(plan.out)["tasks"] if t["id"] == "//#check")["inputs"])
    theirs = {e[5:] for e in nx_hash_plan(ws.root, "check")["root:check"] if e.startswith("file:")}
    assert not {p for p in theirs if p.startswith(".nx/")}
    assert {p for p in ours if p.startswith(".nx/")} == set()
    assert ours == theirs
    first = ws.vx("run", "root:check", timeout=TIMEOUT)
    assert first.code == 0, first.err + first.out
    nx_cli(ws.root, "run", "root:check", cache=True)  # Nx rewrites its files
    again = ws.vx("run", "root:check")
    assert again.statuses()["//#check"][1] in ("local", "up-to-date")


@pytest.mark.feature("TL-05")
def test_a_root_project_workspace_replays_every_warm_run(repo, nx_modules):
    """nx-recipes' angular-standalone shape: a root project (its `{projectRoot}/**/*` is the
    whole tree) and a .gitignore that names `.nx/cache` only, so what vx's call for Nx's graph
    writes under `.nx/workspace-data` is untracked and in git's listing. Every warm `vx run-many`
    replays its receipt, as Nx hits each time. A guard, not a fix: it passed before; the warm
    runs there that planned in full had `--output-logs full` (docs/benchmarks.md)."""
    ws = root_project(repo, nx_modules, "node_modules\ndist\n.nx/cache\n")

    def replayed() -> bool:
        time.sleep(0.06)  # past the racy window of what the last run wrote, as settle() does
        result = ws.vx(
            "run-many", "-t", "build", "check", summary=False, env={"VX_TIMING": "1"},
            timeout=TIMEOUT,
        )  # fmt: skip
        assert result.code == 0, result.err + result.out
        return "receipt check" in result.err

    assert [replayed() for _ in range(3)] == [False, False, True]  # cold, then the receipt
    assert kept(ws) and (ws.root / ".nx" / "workspace-data").is_dir()  # Nx was asked, wrote there
    assert [replayed() for _ in range(3)] == [True] * 3


@pytest.mark.feature("TL-05")
@pytest.mark.parametrize(
    "ignores",
    [
        {".gitignore": "node_modules\n.nx\n.vx\n**/dist/\n"},
        {
            ".gitignore": "node_modules\n.nx\n.vx\n/apps/*/dist\n",
            "libs/a/.gitignore": "dist\n",
        },
    ],
    ids=["globbed", "anchored-and-nested"],
)
def test_a_build_s_gitignored_outputs_ask_nx_nothing_again(repo, nx_modules, ignores):
    """Nx's file walk leaves gitignored files out, so a build writing its gitignored outputs moves
    nothing Nx's graph depends on: the kept answer holds, Nx is not asked again."""
    spec = no_plugins_workspace()
    spec.update(ignores)
    repo.write(spec)
    link_modules(repo.root, nx_modules)
    ws = repo.commit()
    built = ws.vx("run-many", "-t", "build", timeout=TIMEOUT)
    assert built.code == 0, built.err + built.out
    assert (ws.root / "libs/a/dist/out.js").exists() and (ws.root / "apps/app/dist/out.js").exists()
    before = kept(ws)
    assert len(before) == 1
    plan = ws.vx("run-many", "-t", "build", "--dry", timeout=TIMEOUT)
    assert plan.code == 0, plan.err
    assert kept(ws) == before
    # what git does not ignore is still walked: a new source file asks Nx again
    (ws.root / "apps/app/src/more.ts").write_text("export const more = 1;\n")
    assert ws.vx("run-many", "-t", "build", "--dry", timeout=TIMEOUT).code == 0
    assert len(kept(ws)) == 2


@pytest.mark.feature("TL-05")
def test_an_nx_that_cannot_build_its_graph_is_refused_not_run_without_its_edges(repo):
    """Nx installed but broken: the run is refused with Node's message (exit 2), as where nx.json
    declares plugins, never run on a graph smaller than Nx's."""
    repo.write(no_plugins_workspace()).commit()
    nx = repo.root / "node_modules" / "nx"
    (nx / "src" / "utils").mkdir(parents=True)
    (nx / "package.json").write_text('{"name": "nx", "version": "21.6.4"}')
    (nx / "src" / "utils" / "workspace-context.js").write_text("require('vx-gone-module');\n")
    result = repo.vx("run-many", "-t", "build")
    assert result.code == 2, result.err + result.out
    first = result.err.splitlines()[0]
    assert "the workspace's Nx could not build its project graph" in first, result.err
    assert "Cannot find module 'vx-gone-module'" in first, result.err
    assert "Traceback" not in result.err
    assert not (repo.root / "libs/a/dist").exists()
