"""`vx run --affected` (CLI-22, CLI-41, CLI-42): real vx, real git branches, real node builds."""

from __future__ import annotations

import json
import subprocess

import pytest
from support.workspace import build_task, npm_workspace


@pytest.fixture
def ws(repo):
    """a <- b <- c, and d alone; committed on main, then a feature branch checked out."""
    ws = repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}},
                "b": {"deps": ["a"], "tasks": {"build": build_task()}, "files": {"src/b.js": "B;"}},
                "c": {"deps": ["b"], "tasks": {"build": build_task()}, "files": {"src/c.js": "C;"}},
                "d": {
                    "tasks": {"build": build_task()},
                    "files": {"src/d.js": "D;", "README.md": "# d\n"},
                },
            }
        )
    ).commit()
    ws.git("checkout", "-q", "-b", "feature")
    assert ws.vx("run", "build").code == 0
    return ws


def ran(result) -> set[str]:
    assert result.code == 0, result.err
    return set(result.statuses())


@pytest.mark.feature("CLI-41")
def test_a_change_runs_the_tasks_it_reaches_and_their_dependencies(ws):
    (ws.root / "packages/b/src/b.js").write_text("B2;")
    got = ran(ws.vx("run", "build", "--affected"))  # the base: main, the branch this one left
    assert got == {
        "a#build",
        "b#build",
        "c#build",
    }  # b changed, c depends on it; a is b's dependency
    assert "d#build" not in got


@pytest.mark.feature("CLI-41")
def test_committed_changes_on_the_branch_count_and_the_ref_can_be_named(ws):
    (ws.root / "packages/d/src/d.js").write_text("D2;")
    ws.commit("d on the branch")
    assert ran(ws.vx("run", "build", "--affected=main")) == {"d#build"}
    assert "nothing affected since HEAD" in ws.vx("run", "build", "--affected=HEAD").err


@pytest.mark.feature("CLI-41")
def test_a_file_no_cached_task_declares_reaches_every_task_of_its_project(ws):
    (ws.root / "packages/d/README.md").write_text("# d, edited\n")  # build's inputs are src/** only
    assert ran(ws.vx("run", "build", "--affected")) == {"d#build"}


@pytest.mark.feature("CLI-41")
def test_a_lockfile_change_reaches_everything(ws):
    (ws.root / "package-lock.json").write_text("{}\n")
    assert ran(ws.vx("run", "build", "--affected")) == {"a#build", "b#build", "c#build", "d#build"}


@pytest.mark.feature("CLI-42")
def test_nothing_affected_exits_0_and_says_so(ws):
    result = ws.vx("run", "build", "--affected")
    assert result.code == 0 and "nothing affected since main" in result.err
    assert ran(result) == set()


@pytest.mark.feature("CLI-42")
def test_affected_base_from_the_workspace_config(ws):
    (ws.root / "vx.workspace.json").write_text(json.dumps({"affectedBase": "release"}))
    ws.commit("the base named")  # a workspace config change would reach everything
    ws.git("branch", "release")
    (ws.root / "packages/a/src/a.js").write_text("A2;")
    ws.commit("on the branch")
    result = ws.vx("run", "build", "--affected", "--dry=json")
    plan = json.loads(result.out)
    assert {t["id"] for t in plan["tasks"]} == {"a#build", "b#build", "c#build"}


@pytest.mark.feature("CLI-42")
@pytest.mark.parametrize(
    "ref, said", [("no-such-branch", "cannot compare with `no-such-branch`"), ("-rf", "not a ref")]
)
def test_a_bad_ref_is_refused(ws, ref, said):
    result = ws.vx("run", "build", f"--affected={ref}")
    assert result.code == 2 and said in result.err and "Traceback" not in result.err


@pytest.mark.feature("CLI-41")
def test_affected_and_filter_together(ws):
    for p in "bd":
        (ws.root / f"packages/{p}/src/{p}.js").write_text("X;")
    assert ran(ws.vx("run", "build", "--affected", "--filter", "d")) == {"d#build"}


def test_issue17_a_github_pull_request_compares_with_its_base_branch(ws):
    """GITHUB_BASE_REF names the pull request's base: `origin/<it>`; missing, vx says what to fetch."""
    (ws.root / "packages/d/src/d.js").write_text("D2;")
    ws.commit("d on the branch")
    ws.git(
        "update-ref", "refs/remotes/origin/release", "main"
    )  # the base, as a CI checkout fetches it
    ws.git("update-ref", "refs/remotes/origin/main", "HEAD")  # the default base would see nothing
    assert "nothing affected since origin/main" in ws.vx("run", "build", "--affected").err
    assert ran(ws.vx("run", "build", "--affected", env={"GITHUB_BASE_REF": "release"})) == {
        "d#build"
    }
    missing = ws.vx("run", "build", "--affected", env={"GITHUB_BASE_REF": "gone"})
    assert (
        missing.code == 2
        and "git fetch --no-tags origin gone:refs/remotes/origin/gone" in missing.err
    )


def test_issue17_a_shallow_clone_says_what_to_fetch(ws, tmp_path):
    """A depth-1 clone holds the base's tip and HEAD but nothing joining them: exit 2, saying so."""
    from support.workspace import Repo

    for n in (1, 2):
        (ws.root / "packages/d/src/d.js").write_text(f"D{n};")
        ws.commit(f"d {n}")
    clone = tmp_path / "clone"
    subprocess.run(
        [
            "git",
            "clone",
            "-q",
            "--depth",
            "1",
            "--no-single-branch",
            "--branch",
            "feature",
            f"file://{ws.root}",
            str(clone),
        ],
        check=True,
        capture_output=True,
    )
    res = Repo(clone).vx("run", "build", "--affected=origin/main")
    assert res.code == 2, res.out + res.err
    assert "`origin/main` and HEAD share no commit in this shallow clone" in res.err
    assert "git fetch --deepen" in res.err and "Traceback" not in res.err
