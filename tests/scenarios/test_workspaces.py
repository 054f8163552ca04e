"""Workspace shapes vx runs in: npm/yarn arrays, pnpm yaml, single-package repos, the root
project, no git at all (WS-01, WS-02, WS-04, WS-20, WS-21)."""

import pytest
from support.workspace import build_task, npm_workspace

NODE_BUILD = build_task(deps=("^build",))


@pytest.mark.feature("WS-02")
def test_pnpm_workspace_with_excludes(repo):
    repo.write(
        {
            "package.json": {"name": "root", "private": True},
            "pnpm-workspace.yaml": "packages:\n  - 'libs/*'\n  - '!libs/skip'\n",
            ".gitignore": "dist/\n.vx/\n",
            "libs/a/package.json": {"name": "a", "version": "1.0.0"},
            "libs/a/vx.config.json": {"tasks": {"build": NODE_BUILD}},
            "libs/a/src/x.js": "X;",
            "libs/b/package.json": {
                "name": "b",
                "version": "1.0.0",
                "dependencies": {"a": "workspace:^"},
            },
            "libs/b/vx.config.json": {"tasks": {"build": NODE_BUILD}},
            "libs/b/src/y.js": "Y;",
            "libs/skip/package.json": {"name": "skip", "version": "1.0.0"},
            "libs/skip/vx.config.json": {"tasks": {"build": NODE_BUILD}},
        }
    ).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 0, res.err
    assert set(res.statuses()) == {"a#build", "b#build"}


@pytest.mark.feature("WS-20")
def test_yarn_packages_object_and_semver_edges(
    repo,
):  # ^1 beside a local 2.0.0 is not an edge
    repo.write(
        {
            "package.json": {
                "name": "root",
                "private": True,
                "workspaces": {"packages": ["pkgs/*"]},
            },
            ".gitignore": "dist/\n.vx/\n",
            "pkgs/lib/package.json": {"name": "lib", "version": "2.0.0"},
            "pkgs/lib/vx.config.json": {
                "tasks": {
                    "build": {"exec": {"command": "sleep 0.3; mkdir -p dist; echo > dist/done"}}
                }
            },
            "pkgs/old/package.json": {
                "name": "old",
                "version": "1.0.0",
                "dependencies": {"lib": "^1.0.0"},
            },
            "pkgs/old/vx.config.json": {
                "tasks": {
                    "build": {
                        "exec": {"command": "test ! -e ../lib/dist/done && echo independent"},
                        "dependsOn": ["^build"],
                    }
                }
            },
        }
    ).commit()
    res = repo.vx("run", "old#build")
    assert res.code == 0, res.out + res.err
    assert set(res.statuses()) == {"old#build"}


@pytest.mark.feature("WS-01")
def test_single_package_repo(repo):  # a bare package.json is a workspace of one
    repo.write(
        {
            "package.json": {"name": "solo", "version": "1.0.0"},
            ".gitignore": "dist/\n.vx/\n",
            "vx.config.json": {"tasks": {"build": build_task(deps=())}},
            "src/a.js": "A;",
        }
    ).commit()
    res = repo.vx("run", "build")
    assert res.code == 0, res.err
    assert res.task("//#build")["status"] == "success"
    assert (repo.root / "dist/out.js").read_text() == "A;"
    assert repo.vx("run", "build").task("//#build")["cache"] == "up-to-date"


@pytest.mark.feature("WS-04")
def test_root_project_task_by_name(repo):
    files = npm_workspace(
        {"app": {"tasks": {"build": {"exec": {"command": "echo app"}, "dependsOn": ["//#setup"]}}}}
    )
    files["vx.config.json"] = {"tasks": {"setup": {"exec": {"command": "echo root-setup"}}}}
    repo.write(files).commit()
    res = repo.vx("run", "app#build")
    assert res.code == 0, res.err
    assert set(res.statuses()) == {"//#setup", "app#build"}


@pytest.mark.feature("KEY-12")
def test_works_outside_git(repo):  # walk + memo when there is no repository
    repo.write(
        npm_workspace(
            {"app": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A;"}}}
        )
    )
    first = repo.vx("run", "build", "--all")
    assert first.code == 0, first.err
    assert repo.vx("run", "build", "--all").task("app#build")["cache"] == "up-to-date"
    (repo.root / "packages/app/src/a.js").write_text("B;")
    third = repo.vx("run", "build", "--all")
    assert third.task("app#build")["cache"] == "miss"
    assert (repo.root / "packages/app/dist/out.js").read_text() == "B;"


@pytest.mark.feature("WS-21")
def test_nested_vx_run_in_same_workspace_is_refused(repo):
    import sys

    from support.workspace import SRC

    inner = f"PYTHONPATH={SRC} {sys.executable} -m vx run other"
    repo.write(
        npm_workspace(
            {
                "app": {
                    "tasks": {
                        "outer": {"exec": {"command": inner}},
                        "other": {"exec": {"command": "echo other"}},
                    }
                }
            }
        )
    ).commit()
    res = repo.vx("run", "outer", cwd="packages/app")
    assert res.code == 1
    assert "inside a task of the same workspace" in res.out + res.err


@pytest.mark.feature("WS-02")
def test_a_member_reached_through_a_symlink_is_refused_with_the_real_directory(repo):
    """`packages/c -> ../real/c`: its outputs were walked through the link, which vx never follows
    for outputs, so the save held nothing and the next run called the missing outputs up to date."""
    repo.write(
        npm_workspace({"a": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "a"}}})
    )
    real = repo.root / "real/c"
    (real / "src").mkdir(parents=True)
    (real / "package.json").write_text('{"name": "c", "version": "1.0.0"}')
    (real / "src/c.js").write_text("c")
    (repo.root / "packages/c").symlink_to("../real/c")
    repo.commit()
    res = repo.vx("run", "build")
    assert res.code == 2, res.err
    assert (
        "workspace member packages/c is reached through the symlink packages/c (to real/c)"
        in res.err
    )
    assert "list the real directory (real/c)" in res.err and "Traceback" not in res.err
