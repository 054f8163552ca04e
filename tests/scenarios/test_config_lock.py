"""vx-lock.json (TL-06, CLI-05, CLI-32): `vx lock` writes every code config's value and a digest of
each file it read, `vx lock --check` names any drift (exit 1), `vx run --frozen` runs from the lock
with no Node for the configs, and a lock that would hold a secret is never written. Real node,
real git."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from test_code_configs import code_workspace, evaluations, mjs

ECHO = "export default {{ tasks: {{ build: {{ exec: {{ command: 'echo {word}' }} }} }} }};\n"


def _lock(ws) -> dict:
    return json.loads((ws.root / "vx-lock.json").read_text())


def _no_node_path(tmp_path) -> str:
    """A PATH with git and a shell but no node (node is in /usr/bin here, beside everything)."""
    bin_dir = tmp_path / "no-node-bin"
    bin_dir.mkdir()
    for tool in ("git", "sh", "env", "true", "cat"):
        found = shutil.which(tool)
        assert found, tool
        os.symlink(found, bin_dir / tool)
    assert shutil.which("node", path=str(bin_dir)) is None
    return str(bin_dir)


@pytest.mark.feature("TL-06")
def test_lock_then_check_then_drift_names_the_file_read(repo):
    ws = code_workspace(repo, {"a": mjs("a"), "b": ("mjs", ECHO.format(word="bee"))})
    made = ws.vx("lock")
    assert made.code == 0, made.err
    lock = _lock(ws)
    assert set(lock["configs"]) == {"packages/a/vx.config.mjs", "packages/b/vx.config.mjs"}
    assert lock["configs"]["packages/a/vx.config.mjs"]["reads"] == {
        "preset.mjs": lock["configs"]["packages/a/vx.config.mjs"]["reads"]["preset.mjs"]
    }
    assert lock["configs"]["packages/b/vx.config.mjs"]["value"]["tasks"]["build"]["exec"] == {
        "command": "echo bee"
    }
    held = ws.vx("lock", "--check")
    assert held.code == 0, held.err
    preset = ws.root / "preset.mjs"
    preset.write_text(preset.read_text().replace("'${name}'", "'${name}!'"))
    drifted = ws.vx("lock", "--check")
    assert drifted.code == 1, drifted.err
    assert "packages/a/vx.config.mjs: a file it reads changed (preset.mjs)" in drifted.err
    assert "packages/b" not in drifted.err  # b reads no preset: it holds
    (ws.root / "packages/b/vx.config.mjs").write_text(ECHO.format(word="wasp"))
    both = ws.vx("lock", "--check")
    assert both.code == 1 and "packages/b/vx.config.mjs changed" in both.err, both.err
    assert ws.vx("lock").code == 0
    assert ws.vx("lock", "--check").code == 0


@pytest.mark.feature("TL-06")
def test_check_names_a_config_the_lock_lacks_and_a_missing_lock(repo):
    ws = code_workspace(repo, {"a": ("mjs", ECHO.format(word="a"))})
    missing = ws.vx("lock", "--check")
    assert missing.code == 1 and "vx-lock.json is missing" in missing.err, missing.err
    assert ws.vx("lock").code == 0
    ws.write({"packages/c/package.json": {"name": "c", "version": "1.0.0"}})
    ws.write({"packages/c/vx.config.mjs": ECHO.format(word="c")})
    new = ws.vx("lock", "--check")
    assert new.code == 1 and "packages/c/vx.config.mjs is not in vx-lock.json" in new.err
    (ws.root / "packages/a/vx.config.mjs").unlink()
    gone = ws.vx("lock", "--check")
    assert "holds packages/a/vx.config.mjs, which is no longer a project's config" in gone.err


@pytest.mark.feature("TL-06")
def test_frozen_runs_from_the_lock_without_node_and_keys_as_a_plain_run(repo, tmp_path):
    ws = code_workspace(repo, {"a": ("mjs", ECHO.format(word="locked")), "b": mjs("b")})
    plain = ws.vx("run", "build")
    assert plain.code == 0, plain.err
    assert ws.vx("lock").code == 0
    counted = evaluations(ws)
    shutil.rmtree(ws.root / ".vx" / "configs")  # no kept evaluation could serve the run
    frozen = ws.vx("run", "build", "--frozen")
    assert frozen.code == 0, frozen.err
    # the locked value keys the same: the plain run's outputs are up to date
    assert frozen.statuses()["b#build"] == ("success", "up-to-date")
    assert evaluations(ws) == counted  # the preset was never imported
    # No Node at all for the configs, and no staleness check: an edit is not seen until `vx lock`
    (ws.root / "packages/a/vx.config.mjs").write_text(ECHO.format(word="edited"))
    no_node = {"PATH": _no_node_path(tmp_path)}
    still = ws.vx("run", "build", "--frozen", "--dry=json", env=no_node)
    assert still.code == 0, still.err
    commands = {t["id"]: t["command"] for t in json.loads(still.out)["tasks"]}
    assert commands["a#build"] == "echo locked"
    needs_node = ws.vx("run", "build", "--dry=json", env=no_node)
    assert needs_node.code == 2 and "needs Node.js" in needs_node.err, needs_node.err
    unfrozen = ws.vx("run", "build", "--dry=json")
    assert {t["id"]: t["command"] for t in json.loads(unfrozen.out)["tasks"]}[
        "a#build"
    ] == "echo edited"


@pytest.mark.feature("TL-06")
def test_frozen_refuses_a_missing_lock_and_an_unlocked_config(repo):
    ws = code_workspace(repo, {"a": ("mjs", ECHO.format(word="a"))})
    none = ws.vx("run", "build", "--frozen")
    assert none.code == 2, none.err
    assert "vx-lock.json" in none.err and "`vx lock`" in none.err and "Traceback" not in none.err
    assert ws.vx("lock").code == 0
    ws.write({"packages/c/package.json": {"name": "c", "version": "1.0.0"}})
    ws.write({"packages/c/vx.config.mjs": ECHO.format(word="c")})
    unlocked = ws.vx("run", "build", "--frozen")
    assert unlocked.code == 2 and "packages/c/vx.config.mjs" in unlocked.err, unlocked.err
    assert "not in vx-lock.json" in unlocked.err


@pytest.mark.feature("TL-06")
@pytest.mark.parametrize(
    "lock, said",
    [
        ("{ not json", "cannot read the lock"),
        ('{"lockVersion": 99, "configs": {}}', "lock version 99"),
        ('{"lockVersion": 1, "configs": {"packages/a/vx.config.mjs": {}}}', "without a `value`"),
        ('["configs"]', "not a vx lock"),
        (
            '{"lockVersion": 1, "configs": {"packages/a/vx.config.mjs": {"value": {}, "reads": [1]}}}',
            "`reads` must map file names",
        ),
    ],
)
def test_a_bad_lock_is_refused_naming_it(repo, lock, said):
    ws = code_workspace(repo, {"a": ("mjs", ECHO.format(word="a"))})
    (ws.root / "vx-lock.json").write_text(lock)
    result = ws.vx("run", "build", "--frozen")
    assert result.code == 2 and "vx-lock.json" in result.err and said in result.err, result.err
    assert "Traceback" not in result.err


@pytest.mark.feature("TL-06")
def test_a_lock_holding_a_secret_is_not_written(repo):
    config = "export default { tasks: { build: { exec: { command: 'deploy ' + process.env.DEPLOY_TOKEN } } } };\n"
    ws = code_workspace(repo, {"a": ("mjs", config)})
    secret = "s3cr3t-canary-value-1234"
    refused = ws.vx("lock", env={"DEPLOY_TOKEN": secret})
    assert refused.code == 2, refused.err
    assert "DEPLOY_TOKEN" in refused.err and "packages/a/vx.config.mjs" in refused.err
    assert secret not in refused.err and not (ws.root / "vx-lock.json").exists()
    # a variable that is no secret by its name is locked as the config returned it
    plain = "export default { tasks: { build: { exec: { command: 'echo ' + process.env.FLAVOUR } } } };\n"
    (ws.root / "packages/a/vx.config.mjs").write_text(plain)
    assert ws.vx("lock", env={"FLAVOUR": "spicy"}).code == 0
    lock = _lock(ws)
    assert "FLAVOUR" in lock["env"] and "DEPLOY_TOKEN" not in lock["env"]
    assert lock["configs"]["packages/a/vx.config.mjs"]["value"]["tasks"]["build"]["exec"] == {
        "command": "echo spicy"
    }
