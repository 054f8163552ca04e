"""Each project's key folds its own share of the lockfile (PL-05, PL-06), with lockfiles the real
package managers wrote: npm 11, pnpm 7 (v5.4), 8 (v6) and 9 (v9), yarn 1 and 4, bun 1.2.

The workspace: a (needs is-odd, which needs is-number@6), b -> a, c (a leaf with no dependency),
d -> c, and the root with kind-of. Adding `is-number@^7` to c, through the package manager, moves
c's share of the lockfile (and, bun and npm, the hoisting of is-odd's is-number): only c#build
and d#build may miss.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.package_managers import command, install_env, lockfile_name, root_files
from support.workspace import build_task

MANAGERS = ("npm", "pnpm", "pnpm@8", "pnpm@7", "yarn", "berry", "bun")


def _install(pm: str, root: Path, tmp: Path) -> None:
    """The package manager's own install, writing the lockfile (and node_modules where it must)."""
    env = install_env(
        tmp,
        BUN_INSTALL_CACHE_DIR=str(tmp / "bun-cache"),
        npm_config_store_dir=str(tmp / "pnpm-store"),
    )
    flags = {
        "npm": ["install", "--package-lock-only", "--no-audit", "--no-fund", "--loglevel=error"],
        "pnpm": ["install", "--lockfile-only", "--reporter=silent"],
        "yarn": ["install", "--silent", "--ignore-scripts", "--no-progress", "--non-interactive"],
        "berry": ["install", "--mode=update-lockfile"],
        "bun": ["install", "--lockfile-only"],
    }[pm.split("@")[0]]
    argv = command(pm) + flags
    proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{pm}: {proc.stdout}\n{proc.stderr}"
    assert (root / lockfile_name(pm)).exists()


def _workspace(repo, pm: str, tmp: Path):
    link = "workspace:*" if pm in ("pnpm", "pnpm@8", "pnpm@7", "berry", "bun") else "1.0.0"
    files = root_files(pm)
    deps = {"a": {"is-odd": "^3.0.1"}, "b": {"a": link}, "c": {}, "d": {"c": link}}
    for name, dependencies in deps.items():
        files[f"packages/{name}/package.json"] = {
            "name": name,
            "version": "1.0.0",
            "dependencies": dependencies,
        }
        files[f"packages/{name}/vx.config.json"] = {"tasks": {"build": build_task()}}
        files[f"packages/{name}/src/{name}.js"] = f"{name.upper()};"
    ws = repo.write(files)
    _install(pm, ws.root, tmp)
    return ws.commit()


def _add_is_number_to_c(ws, pm: str, tmp: Path) -> None:
    manifest = ws.root / "packages/c/package.json"
    data = json.loads(manifest.read_text())
    data["dependencies"] = {"is-number": "^7.0.0"}
    manifest.write_text(json.dumps(data, indent=2))
    before = (ws.root / lockfile_name(pm)).read_text()
    _install(pm, ws.root, tmp)
    assert (ws.root / lockfile_name(pm)).read_text() != before  # the package manager rewrote it


def _statuses(result) -> dict[str, str]:
    assert result.code == 0, result.err
    return {tid: cache for tid, (_status, cache) in result.statuses().items()}


@pytest.mark.feature("PL-06")
@pytest.mark.parametrize("pm", MANAGERS)
def test_a_new_dependency_of_a_leaf_misses_only_it_and_its_dependants(repo, tmp_path, pm):
    ws = _workspace(repo, pm, tmp_path)
    assert set(_statuses(ws.vx("run", "build")).values()) == {"miss"}
    assert set(_statuses(ws.vx("run", "build")).values()) <= {"local", "up-to-date"}
    _add_is_number_to_c(ws, pm, tmp_path)
    got = _statuses(ws.vx("run", "build"))
    assert {t for t, c in got.items() if c == "miss"} == {"c#build", "d#build"}, got
    why = ws.vx("why", "c#build")
    assert why.code == 0 and "is-number" in why.out and "7.0.0" in why.out, why.out


@pytest.mark.feature("PL-06")
@pytest.mark.parametrize("pm", ("npm", "pnpm"))
def test_the_package_managers_own_add_command_misses_only_the_leaf_and_its_dependants(
    repo, tmp_path, pm
):
    """`npm i is-number -w c`, `pnpm add is-number --filter c`: the manager edits the manifest too."""
    from support.npm_packages import installed

    ws = _workspace(repo, pm, tmp_path)
    assert ws.vx("run", "build").code == 0
    if pm == "npm":
        argv = [
            "npm",
            "install",
            "is-number@^7.0.0",
            "-w",
            "c",
            "--package-lock-only",
            "--no-audit",
            "--no-fund",
        ]
    else:
        argv = [
            "node",
            str(installed("pnpm") / "bin" / "pnpm.cjs"),
            "add",
            "is-number@^7.0.0",
            "--filter",
            "c",
            "--lockfile-only",
            "--reporter=silent",
        ]
    env = {
        **os.environ,
        "npm_config_manage_package_manager_versions": "false",
        "npm_config_store_dir": str(tmp_path / "pnpm-store"),
    }
    proc = subprocess.run(argv, cwd=ws.root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "is-number" in (ws.root / "packages/c/package.json").read_text()
    got = _statuses(ws.vx("run", "build"))
    assert {t for t, c in got.items() if c == "miss"} == {"c#build", "d#build"}, got


@pytest.mark.feature("PL-05")
@pytest.mark.parametrize("pm", ("npm", "pnpm"))
def test_affected_follows_the_projects_whose_share_of_the_lockfile_moved(repo, tmp_path, pm):
    ws = _workspace(repo, pm, tmp_path)
    ws.git("checkout", "-q", "-b", "feature")
    manifest = ws.root / "packages/c/package.json"
    data = json.loads(manifest.read_text())
    data["dependencies"] = {"is-number": "^7.0.0"}
    manifest.write_text(json.dumps(data, indent=2))
    ws.commit("c needs is-number")
    _install(pm, ws.root, tmp_path)  # only the lockfile differs from HEAD now
    assert ws.git("status", "--porcelain").split() == ["M", lockfile_name(pm)]
    assert set(_statuses(ws.vx("run", "build", "--affected=HEAD"))) == {"c#build", "d#build"}


@pytest.mark.feature("PL-06")
def test_a_root_dependency_moves_every_project(repo, tmp_path):
    ws = _workspace(repo, "npm", tmp_path)
    assert ws.vx("run", "build").code == 0
    data = json.loads((ws.root / "package.json").read_text())
    data["devDependencies"]["is-number"] = "^7.0.0"
    (ws.root / "package.json").write_text(json.dumps(data, indent=2))
    _install("npm", ws.root, tmp_path)
    assert set(_statuses(ws.vx("run", "build")).values()) == {
        "miss"
    }  # the root importer is everyone's


@pytest.mark.feature("PL-06")
def test_an_unreadable_lockfile_refuses_the_run_naming_file_and_line(repo, tmp_path):
    ws = _workspace(repo, "pnpm", tmp_path)
    lock = ws.root / "pnpm-lock.yaml"
    lines = lock.read_text().split("\n")
    lines.insert(6, "  'unclosed: 1")
    lock.write_text("\n".join(lines))
    result = ws.vx("run", "build")
    assert result.code == 2, result.err
    assert "pnpm-lock.yaml:7" in result.err and "Traceback" not in result.err
    lock.write_text('{"lockfileVersion": 3, "packages": {"": {}\n')
    lock.rename(ws.root / "package-lock.json")
    result = ws.vx("run", "build")
    assert result.code == 2 and "package-lock.json:2" in result.err, result.err


@pytest.mark.feature("PL-06")
def test_a_binary_bun_lockb_is_keyed_whole(repo, tmp_path):
    """bun's old binary lockfile is not read: any change to it misses every project."""
    ws = _workspace(repo, "npm", tmp_path)
    (ws.root / "package-lock.json").unlink()
    (ws.root / "bun.lockb").write_bytes(b"#!/usr/bin/env bun\nbun-lockfile-format-v0\n\x00\x01")
    ws.commit("bun.lockb")
    assert ws.vx("run", "build").code == 0
    (ws.root / "bun.lockb").write_bytes(b"#!/usr/bin/env bun\nbun-lockfile-format-v0\n\x00\x02")
    assert set(_statuses(ws.vx("run", "build")).values()) == {"miss"}


@pytest.mark.feature("PL-05")
def test_the_digests_are_memoised_by_the_lockfile_identity(repo, tmp_path):
    ws = _workspace(repo, "pnpm", tmp_path)
    assert ws.vx("run", "build").code == 0
    assert not list(
        (ws.root / ".vx").rglob("lockfiles/*.json")
    )  # the cache dir is the store's to make first
    assert ws.vx("run", "build", env={"VX_REPLAY": "0"}).code == 0
    assert len(list((ws.root / ".vx").rglob("lockfiles/*.json"))) == 1
    (ws.root / "packages/a/src/a.js").write_text(
        "A2;"
    )  # planned again (no receipt): the memo answers
    got = _statuses(ws.vx("run", "build"))
    assert got["a#build"] == "miss" and got["c#build"] in ("local", "up-to-date")
    assert len(list((ws.root / ".vx").rglob("lockfiles/*.json"))) == 1
