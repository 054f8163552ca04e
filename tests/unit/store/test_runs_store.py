"""The run history's store (`vx.store.runs`): ids, the pending file, the documented DDL."""

import re
import sqlite3
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from vx.store import runs

DOC = Path(__file__).resolve().parents[3] / "docs" / "caching.md"


def test_run_ids_are_version_7_and_sort_by_time():
    early, late = runs.run_id(1_000_000_000_000_000_000), runs.run_id(1_000_000_001_000_000_000)
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", early
    )
    assert early < late
    assert runs.run_id() != runs.run_id()


def test_the_documented_ddl_is_the_one_in_use():
    text = DOC.read_text()
    block = text[text.index("```sql\nCREATE TABLE IF NOT EXISTS invocations") + 7 :]
    block = block[: block.index("```")]
    documented = [
        " ".join(s.split()).replace("( ", "(").replace(" )", ")") for s in block.split(";")
    ]
    assert [d for d in documented if d] == list(runs.DDL)


def test_pending_runs_fold_in_and_a_torn_record_is_left_out(tmp_path):
    inv = ["id1", "vx run build", "/w", '["build"]', "lR,lW", 2, 1.0, 2.0, 1000.0]
    inv += [1, 0, 1, 0, 0, 1, 0, 1, 1, "h", "linux", "x86_64", "0", None, None, None, None]
    row = ["id1", "a", "build", "k", "cache-hit", "up-to-date"]
    row += [0, 0.0, None, None, 0, 0, 0, 0, None, None, 0, None]
    runs.append_pending(str(tmp_path), inv, [row])
    with open(tmp_path / runs.PENDING, "ab") as f:
        f.write((1000).to_bytes(4, "little") + b"torn")  # a crash mid-write
    runs.fold_pending(str(tmp_path))
    assert not (tmp_path / runs.PENDING).exists()
    db = sqlite3.connect(tmp_path / runs.DB_NAME)
    try:
        assert db.execute("SELECT run_id, replayed FROM invocations").fetchall() == [("id1", 1)]
        assert db.execute("SELECT project, task, status FROM runs").fetchall() == [
            ("a", "build", "cache-hit")
        ]
    finally:
        db.close()


def test_shell_line_quotes_only_what_a_shell_needs():
    assert runs.shell_line(["vx", "run", "app#test", "//#lint"]) == "vx run app#test //#lint"
    assert runs.shell_line(["vx", "run", "#x", "a b"]) == "vx run '#x' 'a b'"


def test_a_damaged_history_starts_afresh(tmp_path):
    (tmp_path / runs.DB_NAME).write_bytes(b"not a database, as an OS crash may leave it" * 100)
    inv = ["id2", "vx run build", "/w", '["build"]', "lR,lW", 2, 1.0, 2.0, 1000.0]
    inv += [0, 0, 0, 0, 0, 0, 0, 1, 0, "h", "linux", "x86_64", "0", None, None, None, None]
    runs.record(str(tmp_path), inv, [])
    db = runs.connect(str(tmp_path), create=False)
    try:
        assert [r["run_id"] for r in runs.invocations(db, 5)] == ["id2"]
    finally:
        db.close()


def test_ci_provider_by_the_variable_each_service_sets():
    assert runs.ci_provider({}) is None
    assert runs.ci_provider({"CI": "false"}) is None
    assert runs.ci_provider({"CI": "true"}) == "ci"
    assert runs.ci_provider({"CI": "true", "GITLAB_CI": "true"}) == "gitlab"
    assert runs.ci_provider({"CI": "1", "GITHUB_ACTIONS": "true", "BUILDKITE": "1"}) == (
        "github-actions"
    )


def test_git_head_gives_nothing_on_a_damaged_git_dir(tmp_path):
    (tmp_path / ".git").write_text("not a gitdir line\n")
    assert runs.git_head(str(tmp_path)) == (None, None)
    (tmp_path / ".git").unlink()
    (tmp_path / ".git").mkdir()  # no HEAD at all
    assert runs.git_head(str(tmp_path)) == (None, None)
    (tmp_path / ".git" / "HEAD").write_bytes(b"\xff\xfe garbage")
    assert runs.git_head(str(tmp_path)) == (None, None)


def test_a_history_of_the_previous_schema_keeps_its_runs(tmp_path):
    """Schema 3 only added the `runs_executed` index: a version-2 history is kept, indexed, not
    started afresh (an upgrade of vx must not lose the runs schedule history reads)."""
    db = sqlite3.connect(tmp_path / runs.DB_NAME)
    for statement in runs.DDL:
        if "INDEX" not in statement:
            db.execute(statement.replace(", tags TEXT)", ")"))  # schema 4 added `tags`
    inv = ["id1", "vx run build", "/w", '["build"]', "lR,lW", 2, 1.0, 2.0, 1000.0]
    inv += [1, 0, 1, 0, 0, 1, 0, 1, 1, "h", "linux", "x86_64", "0", None, None, None, None]
    db.execute(f"INSERT INTO invocations VALUES ({','.join('?' * len(inv))})", inv)
    db.execute("PRAGMA user_version=2")
    db.commit()
    db.close()
    db = runs.connect(str(tmp_path))
    assert db.execute("SELECT run_id, tags FROM invocations").fetchall() == [("id1", None)]
    assert db.execute("PRAGMA user_version").fetchone()[0] == int(runs.SCHEMA)
    indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "runs_executed" in indexes
    db.close()


def pending_run(run_id: str) -> tuple[list, list]:
    inv = [run_id, "vx run build", "/w", '["build"]', "lR,lW", 2, 1.0, 2.0, 1000.0]
    inv += [1, 0, 1, 0, 0, 1, 0, 1, 1, "h", "linux", "x86_64", "0", None, None, None, None]
    inv += ['{"pr":"1"}']  # tags
    row = [run_id, "a", "build", "k", "cache-hit", "up-to-date"]
    row += [0, 0.0, None, None, 0, 0, 0, 0, None, None, 0, None]
    return inv, [row]


def test_the_pending_records_have_the_history_columns():
    import msgspec

    from vx.store import pending

    assert tuple(f.name for f in msgspec.structs.fields(pending.Invocation)) == (
        runs.INVOCATION_COLUMNS
    )
    assert tuple(f.name for f in msgspec.structs.fields(pending.TaskRow)) == runs.RUN_COLUMNS


@settings(max_examples=300)
@given(planted=st.lists(st.binary(max_size=200), max_size=5))
def test_lines_planted_among_the_pending_runs_are_left_out(planted):
    """Item: receipts read with marshal (the run history's pending file too). Whatever is
    written between the replays' own lines, only those come back, each whole."""
    from vx.store import pending

    data = bytearray()
    inv, rows = pending_run("id1")
    data += runs._json_line([inv, rows])
    for junk in planted:
        data += junk.replace(b"\n", b"") + b"\n"
    data += runs._json_line(list(pending_run("id2")))
    found = pending.runs_in(bytes(data))
    assert [run[0][0] for run in found] == ["id1", "id2"]
    assert found[0] == [tuple(inv), [tuple(r) for r in rows]]


def test_a_pending_file_too_big_to_be_the_replays_is_not_read(tmp_path, monkeypatch):
    path = tmp_path / runs.PENDING
    inv, rows = pending_run("id1")
    line = runs._json_line([inv, rows])
    monkeypatch.setattr(runs, "PENDING_LIMIT", 10 * len(line))
    path.write_bytes(line * 11)
    assert runs._pending(str(path)) == []
    path.write_bytes(line * 3)
    assert len(runs._pending(str(path))) == 3
