"""`vx run --affected` (CLI-41) where the change is not in a project's own files: what its config
imports, what the workspace config imports, a package gone since the base, a project newly nested
in another. Real vx, real git, configs evaluated by the real Node."""

from __future__ import annotations

import json
import shutil

import pytest
from support.workspace import build_task, npm_workspace

BUILD = json.dumps(build_task())


def ran(result) -> set[str]:
    assert result.code == 0, result.err
    return set(result.statuses())


def branch(ws):
    """The workspace committed on main, a feature branch checked out, everything built once."""
    ws.commit()
    ws.git("checkout", "-q", "-b", "feature")
    assert ws.vx("run", "build").code == 0
    return ws


@pytest.fixture
def presets(repo):
    """a and b take build from config/preset.mjs (which takes its inputs from config/base.mjs),
    c from its own vx.config.json, d imports a preset of its own."""
    files = npm_workspace(
        {
            "a": {"files": {"src/a.js": "A;"}},
            "b": {"deps": ["a"], "files": {"src/b.js": "B;"}},
            "c": {"deps": ["b"], "tasks": {"build": build_task()}, "files": {"src/c.js": "C;"}},
            "d": {"files": {"src/d.js": "D;"}},
        }
    )
    preset = "import { inputs } from './base.mjs';\nexport const build = {...%s, cache: {...%s.cache, inputs}};\n"
    files["config/base.mjs"] = "export const inputs = { files: ['src/**'] };\n"
    files["config/preset.mjs"] = preset % (BUILD, BUILD)
    files["config/own.mjs"] = f"export const build = {BUILD};\n"
    for p in "ab":
        files[f"packages/{p}/vx.config.mjs"] = (
            "import { build } from '../../config/preset.mjs';\nexport default { tasks: { build } };\n"
        )
    files["packages/d/vx.config.mjs"] = (
        "import { build } from '../../config/own.mjs';\nexport default { tasks: { build } };\n"
    )
    return branch(repo.write(files))


@pytest.mark.feature("CLI-41")
def test_an_edit_to_a_preset_configs_import_reaches_every_project_that_imports_it(presets):
    text = (presets.root / "config/preset.mjs").read_text()
    (presets.root / "config/preset.mjs").write_text(text.replace("built ", "built: "))
    plain = presets.vx("run", "build", "--dry=json")
    assert plain.code == 0, plain.out + plain.err
    assert {t["id"] for t in json.loads(plain.out)["tasks"] if t["predicted"] == "miss"} >= {
        "a#build",
        "b#build",
    }  # a plain run rebuilds them: so must --affected
    assert ran(presets.vx("run", "build", "--affected")) == {"a#build", "b#build", "c#build"}


@pytest.mark.feature("CLI-41")
def test_an_edit_to_what_a_preset_imports_in_turn_reaches_its_importers(presets):
    (presets.root / "config/base.mjs").write_text(
        "export const inputs = { files: ['src/*.js'] };\n"
    )
    assert ran(presets.vx("run", "build", "--affected")) == {"a#build", "b#build", "c#build"}
    (presets.root / "config/own.mjs").write_text(f"export const build = {BUILD}; // edited\n")
    assert ran(presets.vx("run", "build", "--affected")) == {
        "a#build",
        "b#build",
        "c#build",
        "d#build",
    }


@pytest.mark.feature("CLI-41")
def test_what_the_workspace_config_imports_reaches_everything(repo):
    files = npm_workspace(
        {p: {"tasks": {"build": build_task()}, "files": {f"src/{p}.js": "X;"}} for p in "ab"}
    )
    files["vx.workspace.mjs"] = (
        "import { base } from './ws/base.mjs';\nexport default { ...base };\n"
    )
    files["ws/base.mjs"] = "export const base = {};\n"
    ws = branch(repo.write(files))
    (ws.root / "ws/base.mjs").write_text("export const base = { concurrency: 2 };\n")
    assert ran(ws.vx("run", "build", "--affected")) == {"a#build", "b#build"}


@pytest.fixture
def linked(repo):
    """x <- y, and z alone."""
    return branch(
        repo.write(
            npm_workspace(
                {
                    p: {
                        "deps": ["x"] if p == "y" else [],
                        "tasks": {"build": build_task()},
                        "files": {f"src/{p}.js": f"{p};"},
                    }
                    for p in "xyz"
                }
            )
        )
    )


@pytest.mark.feature("CLI-41")
def test_a_package_deleted_since_the_base_reaches_its_former_dependents(linked):
    shutil.rmtree(linked.root / "packages/x")
    assert ran(linked.vx("run", "build", "--affected")) == {"y#build"}


@pytest.mark.feature("CLI-41")
def test_a_package_renamed_since_the_base_reaches_its_former_dependents(linked):
    manifest = linked.root / "packages/x/package.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "name": "x2"}))
    assert ran(linked.vx("run", "build", "--affected")) == {"x2#build", "y#build"}


@pytest.mark.feature("CLI-41")
def test_a_project_newly_nested_in_another_reaches_its_parent(repo):
    files = npm_workspace(
        {
            "a": {
                "tasks": {"build": build_task(inputs=("src/**", "tools/**"))},
                "files": {"src/a.js": "A;", "tools/n/n.js": "N;"},
            },
            "b": {"tasks": {"build": build_task()}, "files": {"src/b.js": "B;"}},
        },
        {"workspaces": ["packages/*", "packages/*/tools/*"]},
    )
    ws = branch(repo.write(files))
    (ws.root / "packages/a/tools/n/package.json").write_text(json.dumps({"name": "n"}))
    assert ran(ws.vx("run", "build", "--affected")) == {"a#build"}


@pytest.mark.feature("CLI-41")
def test_a_preset_package_configs_import_by_name_reaches_its_importers(repo):
    files = npm_workspace(
        {
            "preset": {"files": {"index.mjs": f"export const build = {BUILD};\n"}},
            "a": {"files": {"src/a.js": "A;"}},
            "b": {"tasks": {"build": build_task()}, "files": {"src/b.js": "B;"}},
        }
    )
    files["packages/preset/package.json"] = {"name": "@acme/preset", "exports": "./index.mjs"}
    files["packages/a/vx.config.mjs"] = (
        "import { build } from '@acme/preset';\nexport default { tasks: { build } };\n"
    )
    ws = repo.write(files)
    (ws.root / "node_modules/@acme").mkdir(parents=True)
    (ws.root / "node_modules/@acme/preset").symlink_to("../../packages/preset")  # as installed
    ws = branch(ws)
    (ws.root / "packages/preset/index.mjs").write_text(f"export const build = {BUILD}; // new\n")
    assert ran(ws.vx("run", "build", "--affected")) == {"a#build"}


@pytest.mark.feature("CLI-41")
def test_a_submodule_change_reaches_the_projects_in_it(repo, tmp_path):
    from support.workspace import Repo

    lib = Repo(tmp_path / "lib")
    lib.root.mkdir()
    lib.write(
        {
            "package.json": {"name": "vlib", "version": "1.0.0"},
            "vx.config.json": {"tasks": {"build": build_task()}},
            "src/v.js": "V;",
        }
    ).commit("lib")
    files = npm_workspace(
        {"a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}}},
        {"workspaces": ["packages/*", "vendor/*"]},
    )
    ws = repo.write(files).commit("init")
    ws.git(
        "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib.root), "vendor/lib"
    )
    ws = branch(ws)
    (ws.root / "vendor/lib/src/v.js").write_text("V2;")
    assert ran(ws.vx("run", "build", "--affected")) == {"vlib#build"}  # its worktree
    Repo(ws.root / "vendor/lib").commit("v2")
    ws.commit("the submodule moved on")
    assert ran(ws.vx("run", "build", "--affected")) == {"vlib#build"}  # its commit
