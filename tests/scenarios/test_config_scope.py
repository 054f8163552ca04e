"""One bad config breaks only what needs it: a run reads every project's config, but a
broken one outside the run's scope — the projects it selects, their package.json dependencies
and the projects their tasks' `pkg#task` dependsOn name, transitively — is one warning line and
the run goes on. One inside it, the workspace's own config, the root project's and any under
`--affected` or a run of everything is refused as before (exit 2, file, field, hint). Real git,
real node (a throwing vx.config.ts), real turbo for the turbo.json case."""

from __future__ import annotations

import json
import os

import pytest
from support.npm_packages import installed
from support.turbo import small_turborepo, turbo, turbo_binary
from support.workspace import build_task, npm_workspace

BROKEN_JSONC = '{\n  // a typo: a trailing comma and no value\n  "tasks": { "build": , }\n}\n'
THROWING_TS = "throw new Error('no SECRET_URL set');\nexport default { tasks: {} };\n"


def layout(broken: dict[str, tuple[str, str]], depends_on_tool: bool = False) -> dict:
    """app -> lib by package.json; other and tool link to nothing; app#build dependsOn tool#gen
    when `depends_on_tool`. `broken` maps a project to (its config's name, its text)."""
    app = build_task(deps=("^build", "tool#gen") if depends_on_tool else ("^build",))
    files = npm_workspace(
        {
            "app": {"deps": ["lib"], "tasks": {"build": app}, "files": {"src/a.js": "A;"}},
            "lib": {"tasks": {"build": build_task()}, "files": {"src/l.js": "L;"}},
            "other": {"tasks": {"build": build_task()}, "files": {"src/o.js": "O;"}},
            "tool": {"tasks": {"gen": {"exec": {"command": "echo gen"}}}},
        }
    )
    for name, (config, text) in broken.items():
        files.pop(f"packages/{name}/vx.config.json", None)
        files[f"packages/{name}/{config}"] = text
    return files


def with_typescript(repo):
    """The workspace's own `typescript`, linked into its node_modules as an install would."""
    (repo.root / "node_modules").mkdir(exist_ok=True)
    os.symlink(installed("typescript"), repo.root / "node_modules" / "typescript")
    return repo


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "outside this run" in line]


@pytest.mark.feature("WS-14")
def test_a_broken_jsonc_outside_the_scope_is_one_warning_and_the_run_goes_on(repo):
    repo.write(layout({"other": ("vx.config.json", BROKEN_JSONC)})).commit()
    for args, cwd in ((("build",), "packages/app"), (("build", "--filter=app"), "")):
        res = repo.vx("run", *args, cwd=cwd)
        assert res.code == 0, res.out + res.err
        assert set(res.statuses()) == {"lib#build", "app#build"}
        assert warnings(res.err) == [
            "vx: warning: packages/other/vx.config.json is broken (invalid JSON: Expecting value, "
            "line 3, column 25), outside this run's scope: not read; a run that reaches other "
            "refuses it"
        ], res.err
        assert "Traceback" not in res.err
    # run again: the same warning, never a receipt that replays the run without it
    again = repo.vx("run", "build", cwd="packages/app", summary=False)
    assert again.code == 0 and len(warnings(again.err)) == 1, again.err


@pytest.mark.feature("WS-14")
@pytest.mark.parametrize(
    "args", [("run", "build"), ("run", "build", "--all"), ("run", "build", "--affected")]
)
def test_a_run_of_everything_refuses_the_broken_config_as_before(repo, args):
    repo.write(layout({"other": ("vx.config.json", BROKEN_JSONC)})).commit()
    res = repo.vx(*args)
    assert res.code == 2, res.out + res.err
    assert "in: packages/other/vx.config.json" in res.err and "hint:" in res.err
    assert "Traceback" not in res.err


@pytest.mark.feature("WS-14")
def test_a_broken_config_of_a_dependency_is_refused(repo):
    repo.write(layout({"lib": ("vx.config.json", BROKEN_JSONC)})).commit()
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 2, res.out + res.err
    assert "in: packages/lib/vx.config.json" in res.err and "hint:" in res.err
    assert warnings(res.err) == []


@pytest.mark.feature("WS-14")
def test_a_throwing_ts_config_outside_the_scope_warns_and_exit_is_the_tasks(repo):
    files = layout({"other": ("vx.config.ts", THROWING_TS)})
    app = json.loads(json.dumps(files["packages/app/vx.config.json"]))
    app["tasks"]["fail"] = {"exec": {"command": "exit 3"}}
    files["packages/app/vx.config.json"] = app
    with_typescript(repo.write(files).commit())
    res = repo.vx("run", "fail", cwd="packages/app")
    assert res.code == 1, res.out + res.err
    (line,) = warnings(res.err)
    assert line.startswith("vx: warning: packages/other/vx.config.ts is broken (")
    assert "no SECRET_URL set" in line


@pytest.mark.feature("WS-14")
def test_a_project_named_by_a_cross_project_depends_on_is_in_scope(repo):
    with_typescript(
        repo.write(layout({"tool": ("vx.config.ts", THROWING_TS)}, depends_on_tool=True)).commit()
    )
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 2, res.out + res.err
    assert "in: packages/tool/vx.config.ts" in res.err and "no SECRET_URL set" in res.err
    # lib's own run does not reach tool
    ok = repo.vx("run", "build", cwd="packages/lib")
    assert ok.code == 0 and len(warnings(ok.err)) == 1, ok.err


@pytest.mark.feature("WS-14")
def test_a_broken_workspace_or_root_project_config_is_in_every_scope(repo):
    files = layout({})
    files["vx.workspace.json"] = '{ "concurrency": , }\n'
    repo.write(files).commit()
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 2 and "in: vx.workspace.json" in res.err, res.err
    files = layout({})
    files["vx.config.json"] = BROKEN_JSONC
    repo.write(files).commit()
    (repo.root / "vx.workspace.json").unlink()
    repo.commit("root")
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 2 and "in: vx.config.json" in res.err, res.err


@pytest.mark.feature("WS-14")
def test_a_broken_package_turbo_json_outside_the_filter_warns_where_turbo_says_nothing(repo):
    """turbo 2.11 runs `--filter=b` past a package turbo.json it cannot parse and says nothing;
    without a filter it fails. vx does the same, and names the file it did not read."""
    files = small_turborepo()
    files["packages/c/package.json"] = {"name": "c", "version": "1.0.0", "scripts": {}}
    files["packages/c/turbo.json"] = '{"extends": ["//"], "tasks": {"build": {,}}}'
    repo.write(files).commit()
    binary = turbo_binary()
    theirs = turbo(repo, binary, "run", "build", "--filter=b")
    assert theirs.code == 0 and "turbo.json" not in theirs.err, theirs
    ours = repo.vx("run", "build", "--filter=b")
    assert ours.code == 0, ours.out + ours.err
    assert set(ours.statuses()) == {"a#build", "b#build"}
    (line,) = warnings(ours.err)
    assert line.startswith("vx: warning: packages/c/turbo.json is broken (")
    assert turbo(repo, binary, "run", "build").code != 0
    everything = repo.vx("run", "build")
    assert everything.code == 2 and "in: packages/c/turbo.json" in everything.err


@pytest.mark.feature("WS-14")
def test_a_refusal_of_the_graph_names_the_config_not_read(repo):
    """A task only the unread config declares is unknown to the run: the refusal says which
    config was not read."""
    files = layout({"other": ("vx.config.json", BROKEN_JSONC)})
    files["packages/app/vx.config.json"]["tasks"]["build"]["dependsOn"] = ["^lint"]  # type: ignore[index]
    repo.write(files).commit()
    res = repo.vx("run", "build", cwd="packages/app")
    assert res.code == 2, res.out + res.err
    assert "no project in the workspace declares a task `lint`" in res.err
    assert "not read (broken, outside this run's scope): packages/other/vx.config.json" in res.err
