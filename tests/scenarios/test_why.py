"""`vx why` (OBS-06): what changed between a task's last two keys, from the cache's history."""

from __future__ import annotations

import json

import pytest
from support.workspace import build_task, npm_workspace


@pytest.fixture
def ws(repo):
    lib = build_task()
    lib["cache"]["inputs"]["env"] = ["API_URL"]
    return repo.write(
        npm_workspace(
            {
                "lib": {"tasks": {"build": lib}, "files": {"src/lib.js": "L;"}},
                "app": {
                    "deps": ["lib"],
                    "tasks": {"build": build_task()},
                    "files": {"src/app.js": "A;"},
                },
            }
        )
    ).commit()


def why(ws, *args, cwd=""):
    return ws.vx("why", *args, cwd=cwd, summary=False)


@pytest.mark.feature("OBS-06")
def test_an_edited_file_is_named_and_the_dependant_points_upstream(ws):
    assert ws.vx("run", "app#build").code == 0
    assert "nothing to compare" in why(ws, "lib#build").out
    (ws.root / "packages/lib/src/lib.js").write_text("L2;")
    (ws.root / "packages/lib/src/more.js").write_text("M;")
    assert ws.vx("run", "app#build").code == 0
    lib = why(ws, "lib#build")
    assert (
        lib.code == 0
        and "packages/lib/src/lib.js" in lib.out
        and "packages/lib/src/more.js (added)" in lib.out
    )
    app = why(ws, "build", cwd="packages/app")  # a task of the project you stand in
    assert "upstream  lib#build  → vx why lib#build" in app.out


@pytest.mark.feature("OBS-06")
def test_an_env_change_is_named_without_its_value(ws):
    assert ws.vx("run", "lib#build", env={"API_URL": "https://one"}).code == 0
    assert ws.vx("run", "lib#build", env={"API_URL": "https://two"}).code == 0
    data = json.loads(why(ws, "lib#build", "--format=json").out)
    assert data["verdict"] == "changed" and data["differences"] == [
        {"kind": "env", "what": "API_URL"}
    ]
    assert "https://" not in (ws.root / ".vx/cache/cache.db").read_bytes().decode("latin-1")


@pytest.mark.feature("OBS-06")
def test_unknown_tasks_are_refused_with_the_nearest_name(ws):
    bad = why(ws, "nolib#build")
    assert bad.code == 2 and "did you mean `lib`" in bad.err
    typo = why(ws, "lib#biuld")  # docs/cli.md: VX_E_UNKNOWN_TASK, as `vx run` refuses it
    assert typo.code == 2 and "did you mean `build`" in typo.err, typo.err
    as_json = json.loads(why(ws, "lib#biuld", "--format=json").out)
    assert as_json["error"]["code"] == "VX_E_UNKNOWN_TASK"
    assert why(ws, "lint").code == 2 and why(ws).code == 2


@pytest.mark.feature("OBS-06")
def test_after_a_hit_it_says_so_and_since_when_the_key_is_unchanged(ws):
    assert ws.vx("run", "lib#build").code == 0
    first = json.loads(ws.vx("last", "--format", "json", summary=False).out)["run"]
    assert ws.vx("run", "lib#build").code == 0
    hit = why(ws, "lib#build")
    assert hit.code == 0 and "lib#build: a cache hit" in hit.out, hit.out
    assert "unchanged since" in hit.out
    data = json.loads(why(ws, "lib#build", "--format=json").out)
    assert data["verdict"] == "hit" and data["lastRun"]["cache"] in ("local", "up-to-date")
    assert data["since"] == first["started_at"]  # the run that first had this key


@pytest.mark.feature("OBS-06")
def test_nx_spelling_of_a_task_resolves(ws):
    assert ws.vx("run", "lib#build").code == 0
    nx = json.loads(why(ws, "lib:build", "--format=json").out)
    assert nx["task"] == "lib#build" and nx["verdict"] == "first"


@pytest.mark.feature("OBS-06")
def test_with_no_history_it_answers_from_the_plan(ws):
    """A fresh clone: no run on record, so what the key is folded from now."""
    planned = why(ws, "app#build")
    assert planned.code == 0 and "no run on record here; from the plan" in planned.out
    assert "upstream  lib#build" in planned.out and "packages/app/src/app.js" in planned.out
    data = json.loads(why(ws, "app#build", "--format=json").out)
    dry = json.loads(ws.vx("run", "app#build", "--dry=json").out)
    keys = {t["id"]: t["key"] for t in dry["tasks"]}
    assert data["verdict"] == "planned" and data["key"] == keys["app#build"]
    assert data["upstream"] == {"lib#build": keys["lib#build"]}
    assert data["predicted"] == "miss"


def test_cli_format_json_is_taken_in_both_spellings(ws):
    """`--format json` and `--format=json` mean the same for every verb that formats (one flag
    parser): `vx why` took only the `=` form, `vx show` and `vx cache prune` both."""
    assert ws.vx("run", "lib#build").code == 0
    for verb in (["why", "lib#build"], ["show", "lib#build"], ["cache", "prune", "--dry-run"]):
        spaced = ws.vx(*verb, "--format", "json", summary=False)
        joined = ws.vx(*verb, "--format=json", summary=False)
        assert spaced.code == joined.code == 0, (verb, spaced.err, joined.err)
        assert json.loads(spaced.out) == json.loads(joined.out)
    bad = ws.vx("why", "lib#build", "--format", "yaml", summary=False)
    assert bad.code == 2 and "neither text nor json" in bad.err


@pytest.mark.feature("OBS-06")
def test_against_a_named_run_every_change_since_it_is_named(ws):
    """`--run RUNID`: the latest key against the key in that run, not only the last move."""
    assert ws.vx("run", "lib#build").code == 0
    first = json.loads(ws.vx("last", "--format", "json", summary=False).out)["run"]["run_id"]
    (ws.root / "packages/lib/src/lib.js").write_text("L2;")
    assert ws.vx("run", "lib#build").code == 0
    (ws.root / "packages/lib/src/more.js").write_text("M;")
    assert ws.vx("run", "lib#build").code == 0
    plain = why(ws, "lib#build")
    assert "packages/lib/src/more.js (added)" in plain.out and "lib.js" not in plain.out
    since = why(ws, "lib#build", "--run", first[:13])  # a prefix: the id's time and more
    assert since.code == 0 and f"since run {first}" in since.out, since.err
    assert (
        "packages/lib/src/lib.js" in since.out and "packages/lib/src/more.js (added)" in since.out
    )
    data = json.loads(why(ws, "lib#build", "--run", first, "--format", "json").out)
    assert data["verdict"] == "changed" and data["run"]["runId"] == first
    assert data["differences"] == [
        {"kind": "file", "what": "packages/lib/src/more.js (added)"},
        {"kind": "file", "what": "packages/lib/src/lib.js"},
    ]
    latest = json.loads(ws.vx("last", "--format", "json", summary=False).out)["run"]["run_id"]
    same = json.loads(why(ws, "lib#build", "--run", latest, "--format=json").out)
    assert same["verdict"] == "same" and same["key"] == same["lastRun"]["key"]


@pytest.mark.feature("OBS-06")
def test_a_run_id_that_names_no_run_or_not_the_task_is_refused(ws):
    assert ws.vx("run", "lib#build").code == 0
    lib_only = json.loads(ws.vx("last", "--format", "json", summary=False).out)["run"]["run_id"]
    unknown = why(ws, "lib#build", "--run", "zzzz")
    assert unknown.code == 2 and "vx last --list" in unknown.err, unknown.err
    assert "Traceback" not in unknown.err
    absent = why(ws, "app#build", "--run", lib_only)
    assert absent.code == 2 and "did not include app#build" in absent.err, absent.err
    assert "Traceback" not in absent.err
    assert ws.vx("run", "app#build").code == 0
    ambiguous = why(ws, "lib#build", "--run", lib_only[:1])  # both ids share their first digit
    assert ambiguous.code == 2 and "give more of the id" in ambiguous.err, ambiguous.err
