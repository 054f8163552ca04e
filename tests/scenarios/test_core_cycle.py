"""The core promise on a small graph: run in order, hit when nothing changed, restore what was
deleted, re-run exactly what an edit reaches (EX-01, KEY-12, LC-07, LC-09, GR-02)."""

import pytest
from support.workspace import build_task, npm_workspace


def make(repo):
    repo.write(
        npm_workspace(
            {
                "base": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A1;"}},
                "mid": {
                    "deps": ["base"],
                    "tasks": {"build": build_task()},
                    "files": {"src/m.js": "M;"},
                },
                "top": {
                    "deps": ["mid"],
                    "tasks": {"build": build_task()},
                    "files": {"src/t.js": "T;"},
                },
                "other": {"tasks": {"build": build_task(deps=())}, "files": {"src/o.js": "O;"}},
            }
        )
    ).commit()
    return repo


def test_cold_run_executes_everything_then_warm_run_is_up_to_date(repo):
    make(repo)
    cold = repo.vx("run", "build", "--all")
    assert cold.code == 0, cold.err
    assert {s for s in cold.statuses().values()} == {("success", "miss")}
    assert (repo.root / "packages/top/dist/out.js").read_text() == "T;"
    warm = repo.vx("run", "build", "--all")
    assert warm.code == 0, warm.err
    assert {s for s in warm.statuses().values()} == {("success", "up-to-date")}


def test_deleted_outputs_are_restored_byte_identical(repo):
    make(repo)
    repo.vx("run", "build", "--all")
    before = (repo.root / "packages/mid/dist/out.js").read_bytes()
    for pkg in ("base", "mid", "top", "other"):
        (repo.root / f"packages/{pkg}/dist/out.js").unlink()
    res = repo.vx("run", "build", "--all")
    assert res.code == 0, res.err
    assert {s for s in res.statuses().values()} == {("success", "local")}
    assert (repo.root / "packages/mid/dist/out.js").read_bytes() == before
    again = repo.vx("run", "build", "--all")
    assert {s for s in again.statuses().values()} == {("success", "up-to-date")}


def test_editing_a_base_source_reruns_it_and_its_dependants_only(repo):
    make(repo)
    repo.vx("run", "build", "--all")
    (repo.root / "packages/base/src/a.js").write_text("A2;")
    res = repo.vx("run", "build", "--all")
    assert res.statuses() == {
        "base#build": ("success", "miss"),
        "mid#build": ("success", "miss"),
        "top#build": ("success", "miss"),
        "other#build": ("success", "up-to-date"),
    }
    assert (repo.root / "packages/base/dist/out.js").read_text() == "A2;"


def test_editing_back_restores_the_earlier_entry(repo):
    make(repo)
    repo.vx("run", "build", "--all")
    src = repo.root / "packages/base/src/a.js"
    src.write_text("A2;")
    repo.vx("run", "build", "--all")
    src.write_text("A1;")
    res = repo.vx("run", "build", "--all")
    assert res.task("base#build")["cache"] == "local"
    assert (repo.root / "packages/base/dist/out.js").read_text() == "A1;"


@pytest.mark.feature("CLI-01")
def test_dependencies_run_first_from_a_package_dir(
    repo,
):  # default scope is the cwd's project
    make(repo)
    res = repo.vx("run", "build", cwd="packages/top")
    assert res.code == 0, res.err
    assert set(res.statuses()) == {"base#build", "mid#build", "top#build"}
    assert not (repo.root / "packages/other/dist").exists()


@pytest.mark.feature("LC-08")
def test_stale_output_files_are_wiped_before_exec(repo):
    make(repo)
    repo.vx("run", "build", "--all")
    stray = repo.root / "packages/base/dist/stale.js"
    stray.write_text("old")
    (repo.root / "packages/base/src/a.js").write_text("A3;")
    repo.vx("run", "build", "--all")
    assert not stray.exists()


@pytest.mark.feature("LC-08")
def test_the_wipe_before_exec_and_restore_never_deletes_a_file_git_tracks(repo):
    """A compiler that writes `src/*.js` beside the sources, in a package with a committed
    `src/legacy.js`: the wipe of the declared outputs deleted the committed file before the task
    ran, and again before every restore. A tracked file is a source; the task may overwrite it."""
    emit = (
        "node -e \"require('fs').writeFileSync('src/index.js', "
        "require('fs').readFileSync('src/index.ts', 'utf8'))\""
    )
    task = build_task(deps=(), command=emit, outputs=("src/**/*.js",), inputs=("src/**/*.ts",))
    files = {"src/index.ts": "export const x = 1;\n", "src/legacy.js": "module.exports = 1;\n"}
    repo.write(npm_workspace({"a": {"tasks": {"build": task}, "files": files}})).commit()
    legacy = repo.root / "packages/a/src/legacy.js"
    first = repo.vx("run", "build", "--all")
    assert first.code == 0, first.err
    assert legacy.read_text() == "module.exports = 1;\n"
    (repo.root / "packages/a/src/index.js").unlink()  # a restore, over a tree that is not current
    again = repo.vx("run", "build", "--all")
    assert again.task("a#build")["cache"] == "local", again.err
    assert legacy.read_text() == "module.exports = 1;\n"
    assert repo.git("status", "--porcelain", "--untracked-files=no") == ""


@pytest.mark.feature("KEY-12")
def test_a_new_untracked_input_changes_the_key(repo):  # untracked files are inputs
    make(repo)
    repo.vx("run", "build", "--all")
    (repo.root / "packages/other/src/new.js").write_text("N;")
    res = repo.vx("run", "build", "--all")
    assert res.task("other#build")["cache"] == "miss"
    assert (repo.root / "packages/other/dist/out.js").read_text() == "N;O;"
