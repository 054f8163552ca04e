"""`vx info --format json` (CLI-08): the doctor as one document — key and schema versions, the
store and its orphans, recent runs, git's status cache settings, the lock's presence — checked
against its shipped schema."""

import json

import pytest
from support.schemas import validate
from support.workspace import one_build


@pytest.mark.feature("CLI-08")
def test_info_as_json_names_the_store_runs_git_settings_and_lock(repo):
    repo.write(one_build()).commit()
    repo.git("config", "core.untrackedCache", "true")
    assert repo.vx("run", "app#build", "--tag", "pr=5", summary=False).code == 0
    cache = repo.root / ".vx" / "cache"
    store = next(p.parent for p in repo.root.glob(".vx/**/*.tar.zst"))
    (store / ("0" * 64 + ".tar.zst")).write_bytes(b"x" * 10)  # an artifact no entry names
    res = repo.vx("info", "--format", "json", summary=False)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    validate(doc, "info.json")
    assert doc["root"] == str(repo.root) and doc["cacheDir"] == str(cache)
    assert doc["keyVersion"] and doc["storeSchema"] and doc["historySchema"] >= 4
    assert doc["store"]["entries"] == 1 and doc["store"]["bytes"] > 0
    assert (doc["store"]["orphans"], doc["store"]["orphanBytes"]) == (1, 10)
    assert doc["runs"]["last24h"] == 1
    assert doc["runs"]["recent"][0]["tags"] == {"pr": "5"}
    assert doc["gitStatusCache"] == {"fsmonitor": None, "untrackedCache": "true"}
    assert doc["lock"]["present"] is False
    (repo.root / "vx-lock.json").write_text("{}")
    assert json.loads(repo.vx("info", "--format", "json", summary=False).out)["lock"]["present"]


@pytest.mark.feature("CLI-08")
def test_info_as_json_outside_a_workspace_says_why_and_a_bad_format_is_refused(repo, tmp_path):
    res = repo.vx("info", "--format", "json", cwd="..", summary=False)
    doc = json.loads(res.out)
    validate(doc, "info.json")
    assert res.code == 0 and doc["root"] is None and "workspace" in doc["unavailable"]
    bad = repo.vx("info", "--format", "yaml", summary=False)
    assert bad.code == 2 and "--format" in bad.err and "Traceback" not in bad.err
