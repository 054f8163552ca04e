"""Bad config is refused with exit 2, naming the file, the field and a hint (WS-03, WS-08, GR-04, GR-06)."""

import pytest
from support.workspace import build_task, npm_workspace


@pytest.mark.feature("WS-08")
def test_unknown_key_names_file_field_and_did_you_mean(repo):
    task = build_task(deps=())
    task["dependOn"] = []
    repo.write(npm_workspace({"app": {"tasks": {"build": task}}})).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 2
    assert "packages/app/vx.config.json" in res.err
    assert "tasks.build" in res.err
    assert "dependsOn" in res.err  # the did-you-mean
    assert "Traceback" not in res.err


@pytest.mark.feature("WS-08")
def test_turbo_spelling_points_to_vx_home(repo):
    repo.write(
        npm_workspace(
            {"app": {"tasks": {"build": {"exec": {"command": "true"}, "outputs": ["dist/**"]}}}}
        )
    ).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 2
    assert "cache.outputs.files" in res.err


def test_wrong_type_names_expected_type(repo):
    repo.write(
        npm_workspace(
            {"app": {"tasks": {"build": {"exec": {"command": "true", "timeout": "10s"}}}}}
        )
    ).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 2
    assert "tasks.build.exec.timeout" in res.err and "packages/app/vx.config.json" in res.err


@pytest.mark.feature("GR-04")
def test_cycle_prints_the_full_path(repo):
    tasks = {
        "a": {"exec": {"command": "true"}, "dependsOn": ["b"]},
        "b": {"exec": {"command": "true"}, "dependsOn": ["a"]},
    }
    repo.write(npm_workspace({"app": {"tasks": tasks}})).commit()
    res = repo.vx("run", "a", cwd="packages/app")
    assert res.code == 2
    assert "app#a -> app#b -> app#a" in res.err


@pytest.mark.feature("GR-06")
def test_unknown_task_did_you_mean(repo):
    repo.write(npm_workspace({"app": {"tasks": {"build": build_task(deps=())}}})).commit()
    res = repo.vx("run", "biuld", "--all")
    assert res.code == 2
    assert "did you mean `build`" in res.err


@pytest.mark.feature("WS-03")
def test_duplicate_package_names_name_both_paths(repo):
    files = npm_workspace({"one": {}, "two": {}})
    files["packages/two/package.json"] = {"name": "one", "version": "1.0.0"}
    repo.write(files).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 2
    assert "packages/one/package.json" in res.err and "packages/two/package.json" in res.err


def test_broken_json_names_line_and_column(repo):
    files = npm_workspace({"app": {}})
    files["packages/app/vx.config.json"] = (
        '{\n  "tasks": {\n    "build": { "exec": { "command": "true" } }\n    "x": 1\n  }\n}\n'
    )
    repo.write(files).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 2
    assert "packages/app/vx.config.json" in res.err and "line 4" in res.err


def test_unknown_flag_did_you_mean(repo):  # CLI parsing rules
    repo.write(npm_workspace({"app": {"tasks": {"build": build_task(deps=())}}})).commit()
    res = repo.vx("run", "build", "--concurency", "2", summary=False)
    assert res.code == 2
    assert "did you mean `--concurrency`" in res.err


def test_no_workspace_is_a_clear_error(tmp_path):
    import os
    import subprocess
    import sys

    from support.workspace import SRC

    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.run(
        [sys.executable, "-m", "vx", "run", "build"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "package.json" in proc.stderr and "Traceback" not in proc.stderr
