"""Bad input is a clear exit-2 error, never a crash, and what vx says about it is exact."""

from __future__ import annotations

import json

import pytest
from support.workspace import build_task, npm_workspace


def one_package(repo, task=None):
    repo.write(
        npm_workspace(
            {"app": {"tasks": {"build": task or build_task(deps=())}, "files": {"src/a.js": "A;"}}}
        )
    ).commit()


def assert_clear(res, *words):
    assert res.code == 2, (res.code, res.err)
    assert "internal error" not in res.err and "Traceback" not in res.err, res.err
    for word in words:
        assert word in res.err, res.err


@pytest.mark.parametrize("value", ["inf", "nan", "1e12"])
def test_a_remote_timeout_no_socket_can_wait_is_refused(repo, value):
    one_package(repo)
    res = repo.vx(
        "run",
        "build",
        "--all",
        env={
            "TURBO_API": "http://127.0.0.1:9",
            "TURBO_TOKEN": "t",
            "TURBO_TEAM": "t",
            "TURBO_REMOTE_CACHE_TIMEOUT": value,
        },
    )
    assert_clear(res, f"TURBO_REMOTE_CACHE_TIMEOUT={value}", "hint")
    assert not (repo.root / "packages/app/dist").exists()


def test_a_directory_named_like_a_config_is_refused(repo):
    one_package(repo)
    (repo.root / "packages/b/vx.config.json").mkdir(parents=True)
    (repo.root / "packages/b/package.json").write_text('{"name": "b"}')
    assert_clear(
        repo.vx("run", "build", "--all"), "packages/b/vx.config.json", "is a directory", "hint"
    )


def test_a_config_nested_100000_deep_is_refused(repo):
    one_package(repo)
    deep = "[" * 100_000 + "]" * 100_000
    (repo.root / "packages/app/vx.config.json").write_text(
        '{"tasks": {"build": {"description": ' + deep + "}}}"
    )
    assert_clear(repo.vx("run", "build", "--all"), "packages/app/vx.config.json", "nested", "hint")


@pytest.mark.parametrize("field", ["runtime", "workspaceRuntime"])
def test_a_runtime_input_holding_a_nul_is_refused(repo, field):
    """A probe command with a NUL (`\u0000` in JSON) can never be spawned: it was an internal
    error from subprocess; now the config is refused naming the field."""
    task = build_task(deps=())
    task["cache"]["inputs"][field] = ["echo \0x"]
    one_package(repo, task)
    res = repo.vx("run", "build", "--all")
    assert_clear(res, "packages/app/vx.config.json", f"inputs.{field}[0]", "holds a NUL", "hint")


def test_a_package_json_that_is_an_array_gets_a_hint(repo):
    one_package(repo)
    (repo.root / "packages/app/package.json").write_text("[]")
    assert_clear(
        repo.vx("run", "build", "--all"), "packages/app/package.json", "not an array", "hint"
    )


def test_a_member_glob_matching_nothing_is_named_with_its_file(repo):
    one_package(repo)
    root = json.loads((repo.root / "package.json").read_text())
    root["workspaces"] = ["pkgs/*"]
    (repo.root / "package.json").write_text(json.dumps(root))
    res = repo.vx("run", "build")
    assert_clear(res, "no project declares a task named `build`", "`pkgs/*`", "package.json")


def test_outputs_matching_nothing_name_the_workspace_globs_too(repo):
    task = build_task(deps=(), command="node -e \"console.log('no outputs')\"")
    task["cache"]["outputs"] = {"files": [], "workspaceFiles": ["out/app/**"]}
    one_package(repo, task)
    res = repo.vx("run", "build", "--all")
    assert res.code == 0, res.err
    assert "cache.outputs matched no files (out/app/**)" in res.err, res.err
    assert "()" not in res.err
