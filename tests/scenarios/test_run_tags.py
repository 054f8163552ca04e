"""`vx run --tag k=v` (OBS-05): a run's labels, kept on its history row, in `--summarize` and
`--format json`, shown by `vx last`; a bad tag is refused before anything runs, a secret-looking
one is masked, and a warm tagged run is still replayed from its receipt."""

import json
import sqlite3

import pytest
from support.workspace import one_build


def tags_on_record(repo) -> list:
    db = sqlite3.connect(repo.root / ".vx" / "cache" / "runs.db")
    try:
        return [r[0] for r in db.execute("SELECT tags FROM invocations ORDER BY started_at")]
    finally:
        db.close()


@pytest.mark.feature("OBS-05")
def test_tags_are_kept_in_the_history_the_summary_and_the_record(repo):
    repo.write(one_build()).commit()
    res = repo.vx("run", "app#build", "--tag", "pr=123", "--tag=job=lint=fast", "--format", "json")
    assert res.code == 0, res.err
    assert json.loads(res.out)["run"]["tags"] == {"pr": "123", "job": "lint=fast"}
    assert res.summary is not None and res.summary["tags"] == {"pr": "123", "job": "lint=fast"}
    assert tags_on_record(repo) == ['{"pr":"123","job":"lint=fast"}']
    last = repo.vx("last")
    assert "tags pr=123 job=lint=fast" in last.out.splitlines()[0], last.out
    assert json.loads(repo.vx("last", "--format", "json").out)["run"]["tags"] == {
        "pr": "123",
        "job": "lint=fast",
    }
    untagged = repo.vx("run", "app#build", "--format", "json")
    assert json.loads(untagged.out)["run"]["tags"] == {}


@pytest.mark.feature("OBS-05")
def test_a_bad_tag_is_refused_with_a_hint(repo):
    repo.write(one_build()).commit()
    for tag, said in (
        ("1pr=2", "'1pr' is not a tag key"),
        ("pr", "has no value"),
        ("a b=1", "'a b' is not a tag key"),
    ):
        res = repo.vx("run", "app#build", "--tag", tag)
        assert res.code == 2, res.err
        assert said in res.err and "hint" in res.err and "Traceback" not in res.err, res.err
    twice = repo.vx("run", "app#build", "--tag", "a=1", "--tag", "a=2")
    assert twice.code == 2 and "given twice" in twice.err
    dry = repo.vx("run", "app#build", "--tag", "a=1", "--dry")
    assert dry.code == 2 and "`--tag` cannot be combined" in dry.err
    assert not (repo.root / "packages/app/dist").exists()  # nothing ran


@pytest.mark.feature("OBS-05")
def test_a_secret_tag_is_masked_in_the_history_and_its_command(repo):
    repo.write(one_build()).commit()
    res = repo.vx("run", "app#build", "--tag", "deploy_token=hunter2hunter2", "--tag", "pr=7")
    assert res.code == 0, res.err
    assert tags_on_record(repo) == ['{"deploy_token":"***","pr":"7"}']
    last = repo.vx("last", "--format", "json").out
    assert "hunter2" not in last and '"deploy_token": "***"' in last


@pytest.mark.feature("OBS-05")
def test_a_warm_tagged_run_is_replayed_and_keeps_its_tags(repo):
    repo.write(one_build()).commit()
    args = ("run", "build", "--tag", "pr=9")  # broad: a run whose receipt may be replayed
    for _ in range(2):  # a miss, then a hit that writes the receipt
        assert repo.vx(*args, summary=False).code == 0
    warm = repo.vx(*args, env={"VX_TIMING": "1"}, summary=False)
    assert warm.code == 0 and "receipt check" in warm.err, warm.err  # replayed
    last = json.loads(repo.vx("last", "--format", "json").out)["run"]  # folds the replay's row
    assert last["replayed"] and last["tags"] == {"pr": "9"}
    assert tags_on_record(repo) == ['{"pr":"9"}'] * 3
