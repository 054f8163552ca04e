"""`vx migrate` (TL-04, issue 18): the live mapping of turbo.json or Nx written as vx configs,
which then plan what the live mapping planned, and run from the configs alone."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from support.corpora import NX_CORPUS, TURBO_CORPUS, lay_out
from support.npm_packages import installed
from support.workspace import Repo, npm_workspace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CORPUS = sorted([*TURBO_CORPUS, *NX_CORPUS])
WRITTEN = ("vx.config.json", "vx.config.ts", "vx.workspace.json", "vx-preset.ts")


def example(tmp_path: Path, name: str) -> Repo:
    root = tmp_path / name
    shutil.copytree(
        EXAMPLES / name,
        root,
        ignore=shutil.ignore_patterns(".vx", "dist", "node_modules", ".turbo", ".nx"),
    )
    return Repo(root).commit("example")


def plan(repo: Repo, *tasks: str, written: bool) -> dict:
    """What `--dry=json` says of each task, keys aside (they are vx's own and fold the
    declaration's text): its dependencies, dir, command and input files. A no-op or Nx input
    group the live mapping makes is written as a task running `true`; the files migrate wrote
    are left out of the migrated side's inputs (and must not be in the live side's)."""
    res = repo.vx("run", *tasks, "--dry=json")
    assert res.code == 0, res.err
    out = {}
    for row in json.loads(res.out)["tasks"]:
        inputs = row["inputs"]
        if inputs is not None:
            mine = {p for p in inputs if os.path.basename(p) in WRITTEN}
            assert not mine or written, mine
            inputs = {p: v for p, v in inputs.items() if p not in mine}
        command = "true" if row.get("implicit") else row["command"]
        out[row["id"]] = (row["deps"], row["dir"], command, inputs)
    return out


@pytest.mark.feature("TL-04")
def test_the_turbo_example_migrates_to_the_same_plan_and_runs_from_its_configs(tmp_path):
    repo = example(tmp_path, "turbo")
    live = {tasks: plan(repo, *tasks, written=False) for tasks in (("build",), ("test", "lint"))}
    res = repo.vx("migrate")
    assert res.code == 0, res.err
    for pkg in ("app", "core", "utils"):
        assert (repo.root / "packages" / pkg / "vx.config.json").is_file()
    assert '"migrated": "turbo"' in (repo.root / "vx.workspace.json").read_text()
    repo.commit("migrated")
    for tasks, before in live.items():
        assert plan(repo, *tasks, written=True) == before
    first = repo.vx("run", "build")
    assert first.code == 0, first.err
    assert len(first.summary["tasks"]) == 3
    warm = repo.vx("run", "build")
    assert warm.code == 0, warm.err
    assert {t["cache"] for t in warm.summary["tasks"]} == {"up-to-date"}


@pytest.mark.feature("TL-04")
def test_the_nx_example_migrates_to_the_same_plan_and_a_continuous_target_is_persistent(
    tmp_path,
):
    repo = example(tmp_path, "nx")
    live = {
        tasks: plan(repo, *tasks, written=False)
        for tasks in (("build",), ("test", "lint"), ("app#serve",))
    }
    res = repo.vx("migrate", "--from", "nx")
    assert res.code == 0, res.err
    app = (repo.root / "apps" / "app" / "vx.config.json").read_text()
    # `serve` is continuous in Nx: a persistent task, as the live mapping runs it
    assert '"persistent": {}' in app and "TODO(vx-migrate)" not in app
    repo.commit("migrated")
    for tasks, before in live.items():
        assert plan(repo, *tasks, written=True) == before
    first = repo.vx("run", "build")
    assert first.code == 0, first.err
    warm = repo.vx("run", "build")
    assert warm.code == 0, warm.err
    assert warm.summary["tasks"] and {t["cache"] for t in warm.summary["tasks"]} == {"up-to-date"}


@pytest.mark.feature("TL-04")
def test_a_migrated_repo_reads_no_turbo_json(tmp_path):
    """`migrated` in vx.workspace.json: a turbo.json edit no longer changes what vx runs, and a
    package without a vx.config gets no tasks from it."""
    repo = example(tmp_path, "turbo")
    assert repo.vx("migrate").code == 0
    os.unlink(repo.root / "packages" / "utils" / "vx.config.json")
    turbo = repo.root / "turbo.json"
    turbo.write_text(turbo.read_text().replace('"lint": {', '"extra": {"outputs": []}, "lint": {'))
    repo.commit("edited")
    shown = plan(repo, "build", written=True)
    assert set(shown) == {"@turbo/core#build", "@turbo/app#build", "@turbo/utils#build"}
    # vx's implicit build (shown as `true` by plan()): utils has no config now, and turbo.json's
    # build of it, which would run its script, is not read
    assert shown["@turbo/utils#build"][2] == "true"
    assert shown["@turbo/core#build"][2] == "node ../../scripts/task.js build"
    assert repo.vx("run", "extra", "--dry=json").code == 2  # no project declares it


@pytest.mark.feature("TL-04")
def test_unmappable_turbo_fields_are_todo_comments_with_the_reason(repo):
    files = npm_workspace({"web": {}})
    files["packages/web/package.json"] = {"name": "web", "scripts": {"build": "node -e 1"}}
    files["turbo.json"] = {
        "ui": "tui",
        "tasks": {
            "build": {
                "env": ["NEXT_PUBLIC_*", "API_URL"],
                "inputs": ["src/*.[jt]s", "lib/[!_]*.js"],
                "outputs": ["dist/**"],
                "outputLogs": "new-only",
            }
        },
    }
    files["packages/web/src/a.js"] = "1\n"
    files["packages/web/lib/b.js"] = "1\n"
    repo.write(files).commit()
    live = plan(repo, "build", written=False)
    res = repo.vx("migrate")
    assert res.code == 0, res.err
    text = (repo.root / "packages/web/vx.config.json").read_text()
    todos = [line for line in text.splitlines() if "TODO(vx-migrate)" in line]
    assert any("NEXT_PUBLIC_*" in t and "cache.inputs.env" in t for t in todos), todos
    # a class is written as braces, which match the same names; a negated one cannot be
    assert '"src/*.{j,t}s"' in text
    assert any("lib/[!_]*.js" in t and "character class" in t for t in todos), todos
    assert not any("src/*.[jt]s" in t for t in todos), todos
    assert '"env": ["API_URL"]' in text  # a plain name is mapped, not a TODO
    ws = (repo.root / "vx.workspace.json").read_text()
    assert "TODO(vx-migrate): turbo.json `ui` is not migrated" in ws
    assert "turbo.json tasks.build.outputLogs is not migrated" in ws
    repo.commit("migrated")
    # The negated class matched lib/b.js under turbo, and `[` is literal to vx: the plans part
    # exactly where the TODO says (that input), nowhere else.
    after = plan(repo, "build", written=True)
    assert after.keys() == live.keys()
    (deps, _, command, inputs), (deps0, _, command0, inputs0) = (
        after["web#build"],
        live["web#build"],
    )
    assert (deps, command) == (deps0, command0) == ([], "node -e 1")
    assert {"packages/web/src/a.js", "packages/web/lib/b.js"} <= set(inputs0)
    assert set(inputs0) - set(inputs) == {"packages/web/lib/b.js"}


@pytest.mark.feature("TL-04")
def test_an_existing_vx_config_is_refused_without_force(tmp_path):
    repo = example(tmp_path, "turbo")
    mine = repo.root / "packages" / "core" / "vx.config.json"
    mine.write_text('{"tasks": {"build": {"exec": {"command": "true"}}}}\n')
    repo.commit("one package moved by hand")
    res = repo.vx("migrate")
    assert res.code == 2
    assert "in: packages/core/vx.config.json" in res.err and "--force" in res.err
    assert not (repo.root / "packages" / "app" / "vx.config.json").exists()
    assert not (repo.root / "vx.workspace.json").exists()
    dry = repo.vx("migrate", "--dry")
    assert dry.code == 0, dry.err
    assert "// ── packages/core/vx.config.json" in dry.out
    assert mine.read_text().startswith('{"tasks"')  # --dry writes nothing
    assert not (repo.root / "vx.workspace.json").exists()
    forced = repo.vx("migrate", "--force")
    assert forced.code == 0, forced.err
    assert "Written by `vx migrate`" in mine.read_text()


@pytest.fixture
def typescript():
    def link(repo: Repo) -> None:
        (repo.root / "node_modules").mkdir(exist_ok=True)
        os.symlink(installed("typescript"), repo.root / "node_modules" / "typescript")

    return link


@pytest.mark.feature("TL-04")
def test_format_ts_writes_configs_and_a_preset_that_plan_the_same(tmp_path, typescript):
    repo = example(tmp_path, "turbo")
    typescript(repo)
    live = plan(repo, "build", "test", "lint", written=False)
    res = repo.vx("migrate", "--format", "ts")
    assert res.code == 0, res.err
    preset = (repo.root / "vx-preset.ts").read_text()
    # turbo's global files: the root package.json and the globalDependencies
    assert 'export const workspaceFiles = ["package.json", "scripts/**"];' in preset
    core = (repo.root / "packages" / "core" / "vx.config.ts").read_text()
    assert 'from "../../vx-preset"' in core and "...workspaceFiles" in core
    repo.commit("migrated")
    after = plan(repo, "build", "test", "lint", written=True)
    assert after == live


@pytest.mark.feature("TL-04")
def test_a_root_task_keeps_the_files_its_turbo_globs_reached(repo):
    """turbo's globs of a `//#` task see into the packages; vx's project-relative globs of the
    root stop at them, so migrate writes them as workspace files."""
    files = npm_workspace({"web": {}}, root_extra={"scripts": {"check": "node -e 1"}})
    files["packages/web/package.json"] = {"name": "web", "scripts": {"build": "node -e 1"}}
    files["turbo.json"] = {"tasks": {"//#check": {"outputs": []}, "build": {"outputs": []}}}
    files["packages/web/src/a.js"] = "1\n"
    repo.write(files).commit()
    live = plan(repo, "//#check", written=False)
    assert "packages/web/src/a.js" in live["//#check"][3]
    assert repo.vx("migrate").code == 0
    repo.commit("migrated")
    assert plan(repo, "//#check", written=True) == live


@pytest.mark.feature("TL-04")
def test_a_file_named_outright_beside_its_negation_stays_an_input(repo):
    """turbo hashes `src/setup.test.js` beside `!src/**/*.test.js`; in a vx.config the negation
    takes it back, so the migrated task would not key it: migrate writes it as a workspace file,
    where the project's negations do not reach, and says why."""
    files = npm_workspace({"web": {}})
    files["packages/web/package.json"] = {"name": "web", "scripts": {"test": "node -e 1"}}
    inputs = ["src/**/*.js", "!src/**/*.test.js", "src/setup.test.js", "src/main.js"]
    files["turbo.json"] = {"tasks": {"test": {"inputs": inputs}}}
    for name in ("setup.test.js", "main.js", "other.test.js"):
        files[f"packages/web/src/{name}"] = f"{name}\n"
    repo.write(files).commit()
    live = plan(repo, "web#test", written=False)
    assert "packages/web/src/setup.test.js" in live["web#test"][3]
    res = repo.vx("migrate")
    assert res.code == 0, res.err
    written = (repo.root / "packages/web/vx.config.json").read_text()
    assert "src/setup.test.js in workspaceFiles: turbo hashes a file named outright" in written
    assert '"packages/web/src/setup.test.js"' in written and "src/main.js in" not in written
    repo.commit("migrated")
    assert plan(repo, "web#test", written=True) == live


@pytest.mark.feature("TL-04")
def test_nothing_to_migrate_and_a_code_workspace_file_are_said(tmp_path, repo):
    repo.write(npm_workspace({"web": {}})).commit()
    res = repo.vx("migrate")
    assert res.code == 2 and "nothing to migrate: no turbo.json or nx.json" in res.err
    turbo = example(tmp_path, "turbo")
    assert turbo.vx("migrate", "--from", "nx").code == 2
    (turbo.root / "vx.workspace.mjs").write_text("export default {};\n")
    res = turbo.vx("migrate")
    assert res.code == 0, res.err
    assert 'vx.workspace.mjs: add `migrated: "turbo"` to it' in res.err
    assert not (turbo.root / "vx.workspace.json").exists()  # two workspace files would be refused


@pytest.mark.feature("TL-04")
@pytest.mark.parametrize("shape", CORPUS, ids=[f"{p.parent.name}-{p.stem}" for p in CORPUS])
def test_the_parity_corpora_migrate_to_the_same_plan(repo, shape):
    """turbo.json and Nx shapes from public repositories (the parity corpora): the migrated plan
    is the live one, but for the files git ignores that turbo's explicit globs reach (`apps/**`
    over an ignored `apps/docs/.env`): vx's globs reach those only where the part before `**`
    names them (docs/config.md, `vx migrate`)."""
    spec = json.loads(shape.read_text())
    lay_out(repo, spec)
    tasks = spec["tasks"]
    live = plan(repo, *tasks, written=False)
    res = repo.vx("migrate")
    assert res.code == 0, res.err
    after = plan(repo, *tasks, written=True)
    assert after.keys() == live.keys()
    for tid, (deps, where, command, inputs) in live.items():
        deps2, where2, command2, inputs2 = after[tid]
        assert (deps2, where2, command2) == (deps, where, command), tid
        assert (inputs is None) == (inputs2 is None), tid
        if inputs is None:
            continue
        assert set(inputs2) <= set(inputs), tid
        gone = sorted(set(inputs) - set(inputs2))
        if gone:  # each is ignored by git
            ignored = repo.git("check-ignore", "--no-index", *gone).split()
            assert sorted(ignored) == gone, (tid, gone)
