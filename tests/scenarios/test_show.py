"""`vx show` (CLI-07): the configs as vx resolved them, as text and JSON."""

from __future__ import annotations

import json

import pytest
from support.workspace import build_task, npm_workspace


@pytest.fixture
def ws(repo):
    return repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"build": build_task(), "lint": {"exec": {"command": "eslint ."}}}},
                "b": {"deps": ["a"], "tasks": {"build": build_task()}},
                "c": {},  # no config
            }
        )
    ).commit()


@pytest.mark.feature("CLI-07")
def test_projects_are_listed_with_their_tasks_and_config(ws):
    result = ws.vx("show")
    assert result.code == 0, result.err
    rows = {line.split()[0]: line for line in result.out.splitlines()[1:]}
    assert "build, lint" in rows["a"] and "packages/a/vx.config.json" in rows["a"]
    assert "— (none)" in rows["c"]
    assert ws.vx("show", "projects").out == result.out  # Nx's spelling


@pytest.mark.feature("CLI-07")
def test_a_project_a_task_and_a_task_everywhere(ws):
    project = ws.vx("show", "a")
    assert (
        project.code == 0
        and "command: eslint ." in project.out
        and "dependsOn: ^build" in project.out
    )
    one = json.loads(ws.vx("show", "a#lint", "--format", "json").out)
    assert one == {
        "project": "a",
        "source": "packages/a/vx.config.json",
        "tasks": {"lint": {"exec": {"command": "eslint ."}}},
    }
    everywhere = json.loads(ws.vx("show", "build", "--format=json").out)
    assert set(everywhere["projects"]) == {"a", "b"}
    assert everywhere["projects"]["b"]["cache"]["outputs"]["files"] == ["dist/**"]
    assert json.loads(ws.vx("show", "project", "b", "--format=json").out)["project"] == "b"


@pytest.mark.feature("CLI-07")
def test_a_turbo_repository_shows_the_mapping(repo):
    ws = repo.write(
        {
            "package.json": {"name": "root", "private": True, "workspaces": ["packages/*"]},
            "turbo.json": {"tasks": {"build": {"dependsOn": ["^build"], "outputs": ["dist/**"]}}},
            "packages/a/package.json": {"name": "a", "scripts": {"build": "tsc -b"}},
        }
    ).commit()
    data = json.loads(ws.vx("show", "a#build", "--format=json").out)
    assert data["source"] == "turbo.json"
    assert data["tasks"]["build"] == {
        "exec": {"command": "tsc -b"},
        "dependsOn": ["^build"],
        "cache": {
            "inputs": {"files": ["**"], "workspaceFiles": ["package.json"]},
            "outputs": {"files": ["dist/**"]},
        },
        "turboGlobs": {"onDisk": []},
    }  # `$TURBO_DEFAULT$` alone: git's view; the root package.json, as turbo's global hash


@pytest.mark.feature("CLI-07")
@pytest.mark.parametrize(
    "args, said",
    [
        (["bild"], "did you mean `build`"),
        (["a#bild"], "did you mean `build`"),
        (["x#build"], "no project named `x`"),
        (["a", "b"], "takes one"),
        (["--format=yaml"], "neither text nor json"),
    ],
)
def test_unknown_names_get_a_hint(ws, args, said):
    result = ws.vx("show", *args)
    assert result.code == 2 and said in result.err and "Traceback" not in result.err


def test_issue17_ls_lists_each_projects_dependencies_and_tasks(ws):
    """turbo's `ls`: `vx ls` is `vx show`, and each project names its workspace dependencies."""
    listed = ws.vx("ls")
    assert listed.code == 0 and listed.out == ws.vx("show").out, listed.err
    header, *rows = listed.out.splitlines()
    assert "DEPENDS ON" in header
    b = next(r for r in rows if r.startswith("b "))
    assert " a " in b and "build" in b
    data = json.loads(ws.vx("ls", "--format", "json").out)
    assert {p["name"]: p["dependencies"] for p in data["projects"]}["b"] == ["a"]
    assert "depends on: a" in ws.vx("show", "b").out
