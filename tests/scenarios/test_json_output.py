"""`--format json` on `vx run` and coded refusals: the run's record on stdout (the record `vx
last --format json` prints), a refusal as `{"ok":false,"error":{code,message,docs}}`, each
checked against the JSON Schemas vx ships. Real vx in a real git workspace.

Issue item: every run remembered and explained — a script reads one machine result per run,
and a refusal it can branch on by code, not by wording.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from support.schemas import SCHEMAS, problems, validate
from support.workspace import Repo, lib_and_app, npm_workspace

FAIL = "node -e \"console.log('about to fail');process.exit(3)\""


def workspace(repo):
    e2e = {"exec": {"command": "node -e 0"}, "dependsOn": ["test"]}
    repo.write(lib_and_app(FAIL, e2e=e2e)).commit()


# ---------------------------------------------------------------- the schemas, checked strictly


@pytest.mark.feature("CLI-60")
def test_the_validator_refuses_what_the_schemas_rule_out():
    """The schemas and the validator can fail: an extra field, a missing one, a wrong type, a
    wrong enum or constant, each refused with the validator's message."""
    good = {
        "ok": False,
        "error": {"code": "VX_E_USAGE", "message": "m", "docs": "docs/cli.md#vx_e_usage"},
    }
    validate(good, "error.json")
    bad = {
        "an extra field": {**good, "extra": 1},
        "a missing field": {"ok": False},
        "a wrong constant": {"ok": True, "error": good["error"]},
        "a wrong enum": {"ok": False, "error": {**good["error"], "code": "VX_E_NOPE"}},
        "a wrong type": {"ok": False, "error": {**good["error"], "message": 3}},
    }
    for what, doc in bad.items():
        assert problems(doc, "error.json"), what
    with pytest.raises(AssertionError, match="'VX_E_NOPE' is not one of"):
        validate(bad["a wrong enum"], "error.json")
    with pytest.raises(AssertionError, match="'extra' was unexpected"):
        validate(bad["an extra field"], "error.json")


# ---------------------------------------------------------------- vx run --format json


def vx_json(repo, *args, **kw):
    res = repo.vx(*args, summary=False, **kw)
    lines = res.out.splitlines()
    assert lines, f"nothing on stdout (exit {res.code}): {res.err}"
    return res, json.loads(res.out)


@pytest.mark.feature("CLI-39")
def test_a_good_run_prints_its_record_the_one_vx_last_prints(repo):
    """A passing run: one record on stdout, the rows and footer on stderr, exit 0; `vx last
    --format json` prints that same record afterwards."""
    workspace(repo)
    res, doc = vx_json(repo, "run", "build", "--all", "--output-logs=full", "--format", "json")
    assert res.code == 0, res.err
    validate(doc, "run.json")
    assert doc["ok"] is True and doc["rerun"] is None
    assert doc["run"]["command"] == "vx run build --all --output-logs=full --format json"
    assert {(t["id"], t["status"], t["cache"]) for t in doc["tasks"]} == {
        ("lib#build", "success", "miss"),
        ("app#build", "success", "miss"),
    }
    assert all(re.fullmatch("[0-9a-f]{16}", t["hash"]) for t in doc["tasks"])
    assert "2 tasks" in res.err and "built" in res.err  # the rows, frames and footer
    last = repo.vx("last", "--format", "json")
    assert last.code == 0, last.err
    assert json.loads(last.out) == doc


@pytest.mark.feature("CLI-39")
def test_a_failed_task_is_a_record_with_exit_1_its_log_and_the_rerun(repo):
    """A failing task is a result, not a refusal: `ok` false, the failed row first with its exit
    code, reason and kept log, the skipped dependent after it, and the command to re-run."""
    workspace(repo)
    res, doc = vx_json(repo, "run", "app#e2e", "--format", "json")
    assert res.code == 1, res.err
    validate(doc, "run.json")
    assert doc["ok"] is False and "error" not in doc
    failed, skipped = doc["tasks"][0], doc["tasks"][1]
    assert (failed["id"], failed["status"], failed["exit_code"]) == ("app#test", "failed", 3)
    assert failed["reason"] == "failed (exit 3)"
    assert "about to fail" in Path(failed["log_path"]).read_text()
    assert (skipped["id"], skipped["status"], skipped["blocked_by"]) == (
        "app#e2e",
        "skipped",
        "app#test",
    )
    assert doc["rerun"] == "vx run app#test app#e2e"
    assert doc["run"]["exit_code"] == 1 and doc["run"]["failed_count"] == 1
    assert "about to fail" in res.err and "about to fail" not in res.out


@pytest.mark.feature("CLI-39")
def test_a_replayed_run_prints_the_same_record_shape(repo):
    """The warm path finished from a receipt prints the record too (every task a hit), and that
    is again what `vx last --format json` prints."""
    workspace(repo)
    args = ("run", "build", "--all", "--format", "json")
    assert repo.vx(*args, summary=False).code == 0
    time.sleep(0.06)  # past the racy window of what the first run wrote, as test_receipts does
    assert repo.vx(*args, summary=False).code == 0  # writes the receipt
    res, doc = vx_json(repo, *args, env={"VX_TIMING": "1"})
    assert res.code == 0 and "receipt check" in res.err, res.err  # the replay finished it
    validate(doc, "run.json")
    assert doc["ok"] is True and doc["run"]["replayed"] is True
    assert {(t["id"], t["status"]) for t in doc["tasks"]} == {
        ("lib#build", "cache-hit"),
        ("app#build", "cache-hit"),
    }
    last = repo.vx("last", "--format", "json")
    assert json.loads(last.out) == doc
    plain = repo.vx("run", "build", "--all", summary=False)  # its own receipt: nothing on stdout
    assert plain.code == 0 and plain.out == ""


# ---------------------------------------------------------------- every other product


@pytest.mark.feature("CLI-60")
def test_every_json_product_validates_against_its_schema(repo):
    """Each command that prints JSON, on one workspace before and after runs: `Repo.vx` holds
    each output to its verb's schema (support/schemas.py), so this test fails on a product that
    breaks its schema; the checks here only say the product is the shape asked for."""
    workspace(repo)
    before = {
        ("why", "app#build", "--format", "json"): "planned",  # nothing on record yet: the plan
        ("last", "--list", "--format", "json"): "runs",
        ("history", "--format", "json"): "tasks",
        ("run", "build", "--all", "--dry=json"): "tasks",
    }
    for args, key in before.items():
        doc = json.loads(repo.vx(*args).out)
        assert key in doc or doc.get("verdict") == key, (args, doc)
    assert repo.vx("run", "build", "--all", "--tag", "pr=7").code == 0  # --summarize: summary.json
    repo.write({"packages/lib/extra.json": {"a": 1}}).commit()  # lib keys its *.json
    assert repo.vx("run", "build", "--all").code == 0
    assert repo.vx("run", "build", "--all").code == 0  # every task a hit
    after = {
        ("why", "lib#build"): "hit",
        ("why", "app#build"): "hit",
        ("last", "--list"): "runs",
        ("last",): "run",
        ("history",): "tasks",
        ("show",): "projects",
        ("show", "app"): "project",
        ("show", "app#build"): "project",
        ("show", "build"): "task",
        ("info",): "store",
        ("cache", "prune", "--dry-run", "--max-size", "1B"): "evicted",
        ("cache", "clean", "--dry-run"): "evicted",
    }
    for args, key in after.items():
        res = repo.vx(*args, "--format", "json")
        assert res.code == 0, (args, res.err)
        doc = json.loads(res.out)
        assert key in doc or doc.get("verdict") == key, (args, doc)
    runs = json.loads(repo.vx("last", "--list", "--format", "json").out)["runs"]
    first = runs[-1]["run_id"]
    res = repo.vx("why", "lib#build", "--run", first, "--format", "json")
    assert json.loads(res.out)["verdict"] == "changed", res.err


# ---------------------------------------------------------------- refusals


def refusal(res, code: str, exit_code: int = 2) -> dict:
    """The one JSON line of a refusal on stdout; stderr says it in words, the exit code is the
    one the refusal has without JSON."""
    assert res.code == exit_code, (res.code, res.out, res.err)
    assert len(res.out.splitlines()) == 1, res.out
    doc = json.loads(res.out)
    validate(doc, "error.json")
    assert doc["error"]["code"] == code, doc
    assert doc["error"]["docs"] == f"docs/cli.md#{code.lower()}"
    assert res.err.startswith("error: ") and "Traceback" not in res.err
    assert doc["error"]["message"].splitlines()[0] == res.err.splitlines()[0][len("error: ") :]
    return doc


@pytest.mark.feature("WS-22")
def test_each_refusal_answers_with_its_code(repo, tmp_path):
    """Unknown task, usage, a cycle, a bad config, no workspace, no history: each refusal under
    `--format json` names its code, and its docs section exists."""
    workspace(repo)
    repo.write(
        {
            "packages/loop/package.json": {"name": "loop", "version": "1.0.0"},
            "packages/loop/vx.config.json": {
                "tasks": {
                    "x": {"exec": {"command": "true"}, "dependsOn": ["y"]},
                    "y": {"exec": {"command": "true"}, "dependsOn": ["x"]},
                }
            },
        }
    ).commit()
    broken = tmp_path / "broken"
    broken.mkdir()
    bad = {"tasks": {"b": {"exec": {"command": "true"}, "nope": 1}}}
    Repo(broken).write(npm_workspace({"bad": {"tasks": bad["tasks"]}})).commit()
    bare = tmp_path / "bare"
    bare.mkdir()

    def vx(*args, cwd=""):
        return repo.vx(*args, cwd=cwd, summary=False)

    def outside(where, *args):
        return vx(*args, cwd=str(where))  # an absolute cwd: `root / cwd` is that path

    unknown = refusal(vx("run", "biuld", "--all", "--format", "json"), "VX_E_UNKNOWN_TASK")
    assert "biuld" in unknown["error"]["message"] and "build" in unknown["error"]["message"]
    refusal(vx("run", "build", "--bogus", "--format=json"), "VX_E_USAGE")
    refusal(vx("run", "--format", "json"), "VX_E_USAGE")
    refusal(vx("run", "build", "--all", "--dry", "--format", "json"), "VX_E_USAGE")
    refusal(vx("bogus", "--format", "json"), "VX_E_USAGE")
    refusal(vx("run", "x", "--filter", "loop", "--format", "json"), "VX_E_CYCLE")
    refusal(outside(broken, "run", "b", "--dry=json"), "VX_E_CONFIG")
    refusal(outside(bare, "run", "build", "--format", "json"), "VX_E_NO_WORKSPACE")
    refusal(vx("last", "--format", "json"), "VX_E_NO_HISTORY")
    refusal(vx("why", "nope#build", "--format", "json"), "VX_E_UNKNOWN_TASK")
    refusal(vx("show", "lib#nope", "--format", "json"), "VX_E_UNKNOWN_TASK")
    assert vx("run", "build", "--all").code == 0
    refusal(vx("last", "ffffffff", "--format", "json"), "VX_E_NO_HISTORY")


@pytest.mark.feature("WS-22")
def test_without_json_or_with_it_forwarded_stdout_stays_empty(repo):
    """The JSON refusal is only for a command that asked: not for a plain one, and not for
    `--format json` after `--` (the task's argument); the exit code is the same in all three."""
    workspace(repo)
    asked = repo.vx("run", "nope", "--all", "--format", "json", summary=False)
    plain = repo.vx("run", "nope", "--all", summary=False)
    forwarded = repo.vx("run", "nope", "--all", "--", "--format", "json", summary=False)
    assert [asked.code, plain.code, forwarded.code] == [2, 2, 2]
    assert asked.out and plain.out == "" and forwarded.out == ""
    assert plain.err == forwarded.err == asked.err


def test_every_code_has_its_section_in_the_cli_docs():
    """Each code the error tree can carry is a heading of docs/cli.md, where `docs` points."""
    from vx.errors import CODES

    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    headed = re.findall(r"^#### `(VX_E_[A-Z_]+)`$", text, re.M)
    assert headed == list(CODES)
    schema = json.loads((SCHEMAS / "error.json").read_text())
    assert schema["properties"]["error"]["properties"]["code"]["enum"] == list(CODES)
