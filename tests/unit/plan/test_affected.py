"""`--affected` (CLI-41, CLI-42): which tasks a change seeds, which requested tasks it reaches, and
the base ref (real git for the last)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import msgspec
import pytest

from vx.errors import UsageError
from vx.files.git import check_ref
from vx.model import (
    CacheConfig,
    ExecConfig,
    NxResolved,
    Package,
    ProjectConfig,
    TaskConfig,
    TaskId,
    Workspace,
)
from vx.plan.affected import base_ref, reached, seeds
from vx.plan.graph import Selection, build_graph


def cached(name, deps=(), inputs=("src/**",), outputs=("dist/**",), workspace_files=()):
    return TaskConfig(
        name,
        name,
        ExecConfig("true"),
        tuple(deps),
        CacheConfig(tuple(inputs), tuple(outputs), input_workspace_files=tuple(workspace_files)),
    )


def uncached(name, deps=()):
    return TaskConfig(name, name, ExecConfig("true"), tuple(deps))


#   a <- b <- c
WS = Workspace(
    Path("/ws"),
    "npm",
    {
        "//": Package("//", "", (), "package.json"),
        "a": Package("a", "packages/a", (), "packages/a/package.json"),
        "b": Package("b", "packages/b", ("a",), "packages/b/package.json"),
        "c": Package("c", "packages/c", ("b",), "packages/c/package.json"),
    },
)
CONFIGS = {
    "//": ProjectConfig(""),
    "a": ProjectConfig("x", {"build": cached("build"), "dev": uncached("dev")}),
    "b": ProjectConfig(
        "x",
        {
            "build": cached("build", ["^build"], workspace_files=["scripts/build.js"]),
            "lint": cached("lint", inputs=["src/**", ".eslintrc"], outputs=[]),
        },
    ),
    "c": ProjectConfig("x", {"build": cached("build", ["^build"])}),
}


def ids(*names: str) -> set[TaskId]:
    return {TaskId(*n.split("#")) for n in names}


@pytest.mark.feature("CLI-41")
@pytest.mark.parametrize(
    "paths, seeded",
    [
        (
            ["packages/a/src/x.js"],
            ids("a#build", "a#dev"),
        ),  # its input, and any change for the uncached
        (["packages/b/.eslintrc"], ids("b#lint")),  # only the task that declares it
        (["packages/a/README.md"], ids("a#build", "a#dev")),  # no cached task declares it: all of a
        (["packages/b/package.json"], ids("b#build", "b#lint")),
        (
            ["scripts/build.js"],
            ids("b#build", "//#build"),
        ),  # a workspaceFiles input, across projects
        (
            ["docs/notes.md"],
            ids("//#build"),
        ),  # the root declares no task: only its implicit build (WS-19)
    ],
)
def test_seeds(paths, seeded):
    assert seeds(WS, CONFIGS, paths) == seeded


@pytest.mark.feature("CLI-41")
@pytest.mark.parametrize(
    "path", ["package-lock.json", "pnpm-lock.yaml", "vx.workspace.json", "turbo.json"]
)
def test_a_root_fingerprint_file_reaches_everything(path):
    assert seeds(WS, CONFIGS, [path]) is None


@pytest.mark.feature("CLI-41")
@pytest.mark.parametrize(
    "path, seeded",
    [
        ("packages/b/vite.config.ts", ids("b#build", "b#lint")),  # every target of b may move
        ("tsconfig.base.json", None),  # outside every project: every project
        ("package-lock.json", None),  # a lockfile may move a plugin
        ("nx.json", None),  # as `nx show projects --affected` answers
        ("packages/b/.eslintrc", ids("b#lint")),  # a file the inference never read: as before
    ],
)
def test_a_file_nx_s_plugins_read_seeds_its_whole_project(path, seeded):
    reads = frozenset({"nx.json", "packages/b/vite.config.ts", "tsconfig.base.json"})
    ws = msgspec.structs.replace(WS, nx=NxResolved({}, {}, reads=reads))
    assert seeds(ws, CONFIGS, [path], base="HEAD") == seeded


@pytest.mark.feature("CLI-41")
def test_a_requested_task_runs_when_its_closure_holds_a_seed():
    graph = build_graph(WS, CONFIGS, Selection(("build",), "//", all=True))
    assert set(reached(graph, ids("a#build"))) == ids("a#build", "b#build", "c#build")
    assert set(reached(graph, ids("c#build"))) == ids("c#build")
    assert reached(graph, set()) == []
    assert set(reached(graph, None)) == ids("a#build", "b#build", "c#build")


@pytest.mark.feature("CLI-42")
@pytest.mark.parametrize("ref", ["-x", "^main", "a..b", "main:path", "has space", ""])
def test_refs_that_are_no_refs_are_refused(ref):
    with pytest.raises(UsageError):
        check_ref(ref)


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


@pytest.mark.feature("CLI-42")
def test_outside_a_repository_says_so(tmp_path):
    with pytest.raises(UsageError) as caught:
        base_ref(str(tmp_path), "main", None)
    assert "not in a git repository" in caught.value.message


@pytest.mark.feature("CLI-42")
def test_base_resolution_order(tmp_path):
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "one")
    with pytest.raises(UsageError):
        base_ref(str(tmp_path), None, None)  # on main, one commit: nothing to compare with
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "two")
    assert base_ref(str(tmp_path), None, None) == "HEAD~1"  # main is the branch checked out
    git(tmp_path, "checkout", "-q", "-b", "feature")
    assert base_ref(str(tmp_path), None, None) == "main"
    assert base_ref(str(tmp_path), None, "release") == "release"  # affectedBase
    assert base_ref(str(tmp_path), "HEAD~1", "release") == "HEAD~1"  # the flag wins
    git(tmp_path, "update-ref", "refs/remotes/origin/main", "HEAD")
    git(tmp_path, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
    assert base_ref(str(tmp_path), None, None) == "origin/HEAD"
