"""`--only` / `--exclude-dependencies[=names]` (GR-07, CLI-23; issue 17's "Flags turbo and Nx users
type"): the named tasks run without their dependencies, which are still keyed; a task whose
dependency did not run may hit but never saves; a group's edges and edges to tasks the run
schedules anyway stay."""

from __future__ import annotations

import pytest
from support.workspace import Repo, build_task, npm_workspace

NOT_SAVED = "not saved to the cache: upstream lib#build was not run (--exclude-dependencies)"


def workspace(repo: Repo) -> Repo:
    """lib <- app; app has test (after build and gen) and check (a group of test)."""
    app_tasks = {
        "build": build_task(),
        "gen": {"exec": {"command": "echo generated"}},
        "test": {
            "exec": {"command": "echo tested"},
            "dependsOn": ["build", "gen"],
            "cache": {"inputs": {"files": ["src/**"]}, "outputs": {"files": []}},
        },
        "check": {"dependsOn": ["test"]},
    }
    return repo.write(
        npm_workspace(
            {
                "lib": {"tasks": {"build": build_task()}, "files": {"src/l.js": "L;"}},
                "app": {"deps": ["lib"], "tasks": app_tasks, "files": {"src/a.js": "A;"}},
            }
        )
    ).commit()


@pytest.mark.feature("GR-07")
def test_only_runs_the_named_task_and_never_saves_it(repo):
    workspace(repo)
    res = repo.vx("run", "app#build", "--only")
    assert res.code == 0, res.err
    assert res.statuses() == {"app#build": ("success", "miss")}, res.statuses()
    assert not (repo.root / "packages/lib/dist").exists()  # lib#build never ran
    assert "app#build: " + NOT_SAVED in res.err, res.err
    again = repo.vx("run", "app#build", "--only")
    assert again.statuses() == {"app#build": ("success", "miss")}, again.err  # nothing was saved


@pytest.mark.feature("GR-07")
def test_a_task_whose_dependency_did_not_run_may_hit(repo):
    """Keys fold every dependency, run or not: after a full run, `--only` is a hit; after an
    edit of app it runs, unsaved, and the next full run is a miss for app, a hit for lib."""
    workspace(repo)
    assert repo.vx("run", "app#build").code == 0
    hit = repo.vx("run", "app#build", "--only")
    assert hit.statuses() == {"app#build": ("success", "up-to-date")}, hit.err
    repo.write({"packages/app/src/a.js": "A2;"})
    ran = repo.vx("run", "app#build", "--only")
    assert ran.statuses() == {"app#build": ("success", "miss")}, ran.err
    full = repo.vx("run", "app#build")
    assert full.statuses() == {
        "lib#build": ("success", "up-to-date"),
        "app#build": ("success", "miss"),
    }, full.err


@pytest.mark.feature("GR-07")
def test_exclude_dependencies_with_names_drops_only_those_edges(repo):
    workspace(repo)
    res = repo.vx("run", "test", "--exclude-dependencies=build", cwd="packages/app")
    assert res.code == 0, res.err
    assert sorted(res.statuses()) == ["app#gen", "app#test"], res.statuses()
    assert "app#test: not saved to the cache: upstream app#build was not run" in res.err


@pytest.mark.feature("GR-07")
def test_a_groups_edges_and_edges_to_requested_tasks_stay(repo):
    workspace(repo)
    group = repo.vx("run", "check", "--only", cwd="packages/app")
    assert group.code == 0 and sorted(group.statuses()) == ["app#test"], group.err
    both = repo.vx("run", "app#build", "app#test", "app#gen", "--only")
    assert both.code == 0, both.err
    assert sorted(both.statuses()) == ["app#build", "app#gen", "app#test"], both.err
    assert "app#build: " + NOT_SAVED in both.err  # lib#build did not run
    # test kept its edge to build (requested too), so it is unsaved through build, not cut itself
    assert "app#test: " + NOT_SAVED in both.err, both.err


@pytest.mark.feature("GR-07")
def test_nx_spelling_and_bad_values(repo):
    workspace(repo)
    nx = repo.vx("run", "app#build", "--exclude-task-dependencies")
    assert nx.statuses() == {"app#build": ("success", "miss")}, nx.err
    empty = repo.vx("run", "app#build", "--exclude-dependencies=")
    assert empty.code == 2 and "names no task" in empty.err, empty.err
    typo = repo.vx("run", "app#test", "--exclude-dependencies=biuld")
    assert typo.code == 2 and "did you mean `build`" in typo.err, typo.err
    assert "Traceback" not in typo.err + empty.err
