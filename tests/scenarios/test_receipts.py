"""Receipts (docs/optimizations.md #18): a fully cached broad run is replayed from what the last one
read — and never when anything it read, or anything it found, has changed since.

Every test drives real `vx` processes on a real git repo. Whether a run was replayed shows in its
`VX_TIMING` table: a replay has a `receipt check` row and no `discover` row. Each change below
must send the run through the whole pipeline *and* give the answer that pipeline gives.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from support.processes import Stderr
from support.workspace import build_task, npm_workspace, vx_env

from vx.fastpath import receipt


def workspace(repo, extra_env_task: bool = False):
    tasks = {"build": build_task()}
    if extra_env_task:
        tasks["build"]["cache"]["inputs"]["env"] = ["STAGE"]
    pkgs = {
        "a": {"tasks": tasks, "files": {"src/a.js": "A;"}},
        "b": {"deps": ["a"], "tasks": tasks, "files": {"src/b.js": "B;", "src/c.js": "C;"}},
    }
    repo.write(npm_workspace(pkgs)).commit()
    return repo


def run(repo, *args, env=None, cwd="", verb="run"):
    """`vx run build` (or `args`) from the root, timed; (result, replayed)."""
    result = repo.vx(
        verb, *(args or ("build",)), summary=False, cwd=cwd, env={"VX_TIMING": "1", **(env or {})}
    )
    replayed = "receipt check" in result.err
    assert replayed != ("discover" in result.err), result.err
    return result, replayed


def settle(repo, *args, env=None, verb="run"):
    """Build, then one more full run that writes the receipt; the next one replays."""
    first, _ = run(repo, *args, env=env, verb=verb)
    assert first.code == 0, first.err
    time.sleep(0.06)  # past the racy window of what the first run wrote
    second, replayed = run(repo, *args, env=env, verb=verb)
    assert second.code == 0 and not replayed, second.err
    return second


def drop_row(ws, task_id: str) -> None:
    """Delete a task's index row, past the racy window of what the last run wrote."""
    import sqlite3

    time.sleep(0.06)
    db = sqlite3.connect(ws.root / ".vx" / "cache" / "cache.db")
    db.execute("DELETE FROM entries WHERE task_id = ?", (task_id,))
    db.commit()
    db.close()


def footer(err: str) -> list[str]:
    lines = [line for line in err.splitlines() if line.startswith("─ vx") or " tasks · " in line]
    return [line.rpartition(" · wall")[0] or line for line in lines]


@pytest.fixture
def ws(repo):
    return workspace(repo)


def test_a_warm_broad_run_replays_with_the_same_footer(ws):
    full = settle(ws)
    again, replayed = run(ws)
    assert replayed and again.code == 0
    assert footer(again.err) == footer(full.err) and footer(again.err)[1].startswith(
        "2 tasks · 2 cached (100%)"
    )
    assert again.out == full.out == ""
    assert (ws.root / ".vx" / "receipts" / ".gitignore").read_text() == "*\n"


def receipt_file(ws) -> Path:
    (found,) = [p for p in (ws.root / ".vx" / "receipts").iterdir() if p.name != ".gitignore"]
    return found


def opened(ws) -> tuple[dict, dict]:
    """The receipt's header and body, unsealed with this user's key as the replay unseals them."""
    found = receipt.unseal(memoryview(receipt_file(ws).read_bytes()))
    assert found is not None
    header, body = found
    decoded = receipt.body_of(header, body)
    assert decoded is not None
    return header, decoded


def rewrite_header(ws, **fields) -> None:
    """Sealed again with this user's key: only what the fields say changed."""
    header, body = opened(ws)
    assert receipt.store(str(receipt_file(ws)), header | fields, body)


def accessed(ws) -> list[float]:
    import sqlite3

    db = sqlite3.connect(ws.root / ".vx" / "cache" / "cache.db")
    try:
        return [row[0] for row in db.execute("SELECT accessed_at FROM entries ORDER BY hash")]
    finally:
        db.close()


def test_replays_touch_the_cache_rows_once_an_hour(ws):
    """LC-06 at an hour's grain: the run that wrote the receipt touched every row; replays
    within the hour leave them, the first one after it touches them all again."""
    settle(ws)
    before = accessed(ws)
    _, replayed = run(ws)
    assert replayed and accessed(ws) == before
    rewrite_header(ws, touched=time.time() - 2 * 3600)
    _, replayed = run(ws)
    after = accessed(ws)
    assert replayed and len(after) == 2 and all(a > b for a, b in zip(after, before))


def test_replayed_restores_touch_the_cache_rows_once_an_hour(ws):
    """A replayed restore refreshes `accessed_at` on the warm replay's hour, not on every run
    (it writes its stamps either way, in a transaction that holds the write lock from its check
    of the rows to its commit)."""
    settle(ws)
    before = accessed(ws)
    for hours_ago in (0, 2):
        if hours_ago:
            rewrite_header(ws, touched=time.time() - hours_ago * 3600)
        for pkg in ("a", "b"):
            shutil.rmtree(ws.root / "packages" / pkg / "dist")
        result, replayed = run(ws)
        assert replayed and result.code == 0 and "restore" in result.err, result.err
        assert (ws.root / "packages/b/dist/out.js").read_text() == "B;C;"
        if not hours_ago:
            assert accessed(ws) == before
    after = accessed(ws)
    assert len(after) == 2 and all(a > b for a, b in zip(after, before))


def test_a_row_gone_from_the_index_is_never_restored_by_a_replay(ws):
    """The restore's check of the rows, now in a transaction that touches none of them: a row
    deleted after the receipt was written sends the run to the pipeline."""
    settle(ws)
    for pkg in ("a", "b"):
        shutil.rmtree(ws.root / "packages" / pkg / "dist")
    drop_row(ws, "a#build")
    result, replayed = run(ws)
    assert not replayed and result.code == 0 and "a#build" not in executed(result.err)
    assert (ws.root / "packages/a/dist/out.js").read_text() == "A;"


def test_a_row_gone_from_the_index_is_never_replayed(ws):
    """Once a replay has confirmed the index, the next one trusts it while cache.db and its WAL
    are untouched; deleting a row writes them, so the rows are read again and the miss is seen."""
    settle(ws)
    for _ in range(2):
        _, replayed = run(ws)
        assert replayed
    drop_row(ws, "a#build")
    result, replayed = run(ws)
    # The pipeline reads the rows and finds none; the artifact is indexed again (LC-13): a hit.
    assert not replayed and result.code == 0 and "a#build" not in executed(result.err)


def test_later_replays_trust_the_index_the_last_one_confirmed(ws):
    """A replay that finds cache.db and its WAL as the previous replay confirmed them reads no row.
    As root, SQLite `fchown`s the WAL whenever it opens it, moving its ctime with nothing
    written; counted as a write, it made every replay read the index again (this suite runs as
    root here: every replay below had a `cache touch` row)."""
    settle(ws)
    touched = []
    for _ in range(4):
        time.sleep(0.06)  # past the racy window of the last look at the index
        result, replayed = run(ws)
        assert replayed and result.code == 0, result.err
        touched.append("cache touch" in result.err)
    assert touched[-2:] == [False, False], touched


def git_noting(ws, tmp_path) -> tuple[dict, Path]:
    """A `git` first on PATH that notes each command line, then runs git: the environment for
    every run of a test (PATH is part of the receipt), and the note."""
    real, bin_dir, note = shutil.which("git"), tmp_path / "noting-bin", tmp_path / "git.note"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(f'#!/bin/sh\necho "$*" >> {note}\nexec {real} "$@"\n')
    (bin_dir / "git").chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, note


def replay_noting(ws, env: dict, note: Path) -> tuple[Stderr | object, bool, str]:
    note.write_text("")
    time.sleep(0.06)  # past the racy window of whatever wrote the index last
    result, replayed = run(ws, env=env)
    assert result.code == 0, result.err
    return result, replayed, note.read_text()


def test_a_replay_leaves_out_ls_files_while_the_index_is_as_one_vouched_for(ws, tmp_path):
    """The first replay runs all three listings and notes the index its `ls-files` read; the
    next finds that index unchanged and runs only `status` and `config`."""
    env, note = git_noting(ws, tmp_path)
    settle(ws, env=env)
    _, replayed, first = replay_noting(ws, env, note)
    assert replayed and "ls-files" in first and "status" in first, first
    _, replayed, second = replay_noting(ws, env, note)
    assert replayed and "ls-files" not in second, second
    assert "status" in second and "config" in second, second


def test_an_index_change_git_status_cannot_see_is_never_replayed(ws, tmp_path):
    """`update-index --assume-unchanged` changes `ls-files -v` (tag `h`) and nothing `status`
    shows: the index's new identity makes the replay run `ls-files` again, which refuses."""
    env, note = git_noting(ws, tmp_path)
    settle(ws, env=env)
    for _ in range(2):
        _, replayed, _noted = replay_noting(ws, env, note)
        assert replayed
    ws.git("update-index", "--assume-unchanged", "packages/a/src/a.js")
    _, replayed, noted = replay_noting(ws, env, note)
    assert not replayed and "ls-files" in noted, noted


def test_a_git_variable_changed_since_the_index_was_vouched_for_runs_ls_files(ws, tmp_path):
    """GIT_INDEX_FILE points git at another index whose entries `status` cannot tell apart (the
    same files, one marked assume-unchanged): the vouched-for `.git/index` is no longer what
    git reads, so `ls-files` runs and refuses."""
    env, note = git_noting(ws, tmp_path)
    settle(ws, env=env)
    for _ in range(2):
        _, replayed, _noted = replay_noting(ws, env, note)
        assert replayed
    other = tmp_path / "other-index"
    shutil.copy(ws.root / ".git" / "index", other)
    subprocess.run(
        ["git", "update-index", "--assume-unchanged", "packages/a/src/a.js"],
        cwd=ws.root,
        env={**os.environ, "GIT_INDEX_FILE": str(other)},
        check=True,
    )
    _, replayed, noted = replay_noting(ws, {**env, "GIT_INDEX_FILE": str(other)}, note)
    assert not replayed and "ls-files" in noted, noted


def edit_tracked_input(ws):
    (ws.root / "packages/a/src/a.js").write_text("A2;")


def edit_dirty_input_again(ws):
    # Already modified when the receipt was written, modified again to the same length: git's
    # status line for it cannot change, only the file's identity does.
    (ws.root / "packages/a/src/a.js").write_text("Z9;")


def add_untracked_input(ws):
    (ws.root / "packages/b/src/d.js").write_text("D;")


def edit_config(ws):
    cfg = ws.root / "packages/a/vx.config.json"
    cfg.write_text(cfg.read_text().replace("dist/**", "dist/*"))


def edit_manifest(ws):
    pkg = ws.root / "packages/b/package.json"
    pkg.write_text(pkg.read_text().replace('"1.0.0"', '"1.0.1"'))


@pytest.mark.parametrize(
    "change, reran",
    [
        (edit_tracked_input, {"a#build", "b#build"}),
        (add_untracked_input, {"b#build"}),
        (edit_config, {"a#build", "b#build"}),
        (edit_manifest, {"b#build"}),
    ],
    ids=["tracked-input", "untracked-input", "config", "manifest"],
)
def test_a_changed_input_runs_the_pipeline_and_the_tasks(ws, change, reran):
    settle(ws)
    change(ws)
    result, replayed = run(ws)
    assert not replayed and result.code == 0
    assert executed(result.err) == reran


def executed(err: str) -> set[str]:
    """The tasks the broad flow shows as executed: one `⏺ id` row each."""
    return {
        word
        for line in err.splitlines()
        if line.startswith("⏺ ")
        for word in line.split()
        if "#" in word
    }


def test_a_dirty_file_edited_again_is_not_replayed(ws):
    edit_tracked_input(ws)
    settle(ws)
    edit_dirty_input_again(ws)
    result, replayed = run(ws)
    assert not replayed and result.code == 0 and executed(result.err) == {"a#build", "b#build"}
    assert (ws.root / "packages/a/dist/out.js").read_text() == "Z9;"


@pytest.mark.parametrize("change", ["deleted", "edited", "extra"])
def test_changed_outputs_are_restored_by_the_pipeline(ws, change):
    settle(ws)
    out = ws.root / "packages/b/dist/out.js"
    if change == "deleted":
        out.unlink()
    elif change == "edited":
        out.write_text("tampered")
    else:
        (out.parent / "stray.js").write_text("x")
    result, replayed = run(ws)
    assert not replayed and result.code == 0
    assert out.read_text() == "B;C;" and not (out.parent / "stray.js").exists()


def test_a_changed_input_variable_misses(repo):
    ws = workspace(repo, extra_env_task=True)
    settle(ws, env={"STAGE": "one"})
    _, replayed = run(ws, env={"STAGE": "one"})
    assert replayed
    result, replayed = run(ws, env={"STAGE": "two"})
    assert not replayed and executed(result.err) == {"a#build", "b#build"}


def test_a_receipt_keeps_digests_of_variables_never_their_values(repo):
    """A run may look up a token (TURBO_TOKEN, a keyed variable); the receipt is a workspace file."""
    ws = workspace(repo, extra_env_task=True)
    env = {"STAGE": "stage-canary-7f3a", "TURBO_TOKEN": "token-canary-91bd"}
    settle(ws, env=env)
    _, replayed = run(ws, env=env)
    assert replayed  # the digests still prove the values unchanged
    kept = b"".join(p.read_bytes() for p in (ws.root / ".vx" / "receipts").iterdir())
    assert b"stage-canary-7f3a" not in kept and b"token-canary-91bd" not in kept
    _, replayed = run(ws, env={**env, "TURBO_TOKEN": "another"})
    assert not replayed


def test_a_wiped_cache_is_never_replayed(ws):
    import shutil

    settle(ws)
    shutil.rmtree(ws.root / ".vx" / "cache")
    result, replayed = run(ws)
    assert not replayed and result.code == 0 and executed(result.err) == {"a#build", "b#build"}


def test_deleted_outputs_are_restored_by_the_replay(ws):
    """`rm -rf dist` everywhere: the replay restores each task's outputs from its artifact, as
    the hit lane would, and stamps them; the next run finds them current."""
    import shutil

    settle(ws)
    for pkg in ("a", "b"):
        shutil.rmtree(ws.root / "packages" / pkg / "dist")
    result, replayed = run(ws)
    assert replayed and result.code == 0 and "restore" in result.err
    assert (ws.root / "packages/b/dist/out.js").read_text() == "B;C;"
    after, replayed = run(
        ws
    )  # the restored directories are too new to vouch for: the pipeline looks
    assert not replayed and after.code == 0 and executed(after.err) == set()
    _, replayed = run(ws)
    assert replayed


def test_a_replayed_restore_exits_with_its_commit_in_the_wal(ws):
    """The replay leaves its committed index connection to the exit (`rows.leave_open`): no
    checkpoint, so no fsync. The stamps it wrote stay in the WAL, where the next run reads them,
    and the index is sound."""
    import sqlite3

    settle(ws)
    for pkg in ("a", "b"):
        shutil.rmtree(ws.root / "packages" / pkg / "dist")
    result, replayed = run(ws)
    assert replayed and result.code == 0 and "restore" in result.err
    index = ws.root / ".vx" / "cache" / "cache.db"
    assert Path(f"{index}-wal").stat().st_size > 0  # a close would have checkpointed and removed it
    db = sqlite3.connect(index)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        stamped = {path for (path,) in db.execute("SELECT path FROM output_stamps")}
    finally:
        db.close()
    assert {"packages/a/dist/out.js", "packages/b/dist/out.js"} <= stamped, stamped
    after, replayed = run(ws)
    assert not replayed and after.code == 0 and executed(after.err) == set()


def test_a_damaged_artifact_met_by_a_replayed_restore_runs_the_task(ws):
    import shutil

    settle(ws)
    shutil.rmtree(ws.root / "packages/a/dist")
    for artifact in (ws.root / ".vx" / "cache").glob("*.tar.zst"):
        data = bytearray(artifact.read_bytes())
        data[len(data) // 2] ^= 0xFF  # same size: only reading it finds out
        artifact.write_bytes(bytes(data))
    result, replayed = run(ws)
    assert not replayed and result.code == 0 and "a#build" in executed(result.err)
    assert (ws.root / "packages/a/dist/out.js").read_text() == "A;"


def test_many_restores_share_two_processes(repo):
    import shutil

    pkgs = {
        f"p{i:02d}": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": f"P{i};"}}
        for i in range(20)
    }
    ws = repo.write(npm_workspace(pkgs)).commit()
    settle(ws)
    for i in range(20):
        shutil.rmtree(ws.root / "packages" / f"p{i:02d}" / "dist")
    result, replayed = run(ws)
    assert replayed and result.code == 0
    assert all(
        (ws.root / "packages" / f"p{i:02d}" / "dist/out.js").read_text() == f"P{i};"
        for i in range(20)
    )
    after, _ = run(ws)
    assert after.code == 0 and executed(after.err) == set()


def many(repo, n=20):
    pkgs = {
        f"p{i:02d}": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": f"P{i};"}}
        for i in range(n)
    }
    ws = repo.write(npm_workspace(pkgs)).commit()
    settle(ws)
    for i in range(n):
        shutil.rmtree(ws.root / "packages" / f"p{i:02d}" / "dist")
    return ws


def artifact_of(ws, task_id: str) -> Path:
    import sqlite3

    db = sqlite3.connect(ws.root / ".vx" / "cache" / "cache.db")
    (key,) = db.execute("SELECT hash FROM entries WHERE task_id = ?", (task_id,)).fetchone()
    db.close()
    return ws.root / ".vx" / "cache" / f"{key}.tar.zst"


@pytest.mark.parametrize("task", ["p00#build", "p19#build"], ids=["first half", "second half"])
def test_a_damaged_artifact_in_either_share_of_a_two_process_restore_runs_the_task(repo, task):
    """Each of the two extracting processes refuses a damaged artifact of its share; either way
    the run goes through the pipeline, which runs that task and restores the rest."""
    ws = many(repo)
    artifact = artifact_of(ws, task)
    data = bytearray(artifact.read_bytes())
    data[len(data) // 2] ^= 0xFF
    artifact.write_bytes(bytes(data))
    result, replayed = run(ws)
    assert not replayed and result.code == 0 and executed(result.err) == {task}
    assert all(
        (ws.root / "packages" / f"p{i:02d}" / "dist/out.js").read_text() == f"P{i};"
        for i in range(20)
    )


def test_a_check_failing_after_the_helper_started_leaves_it_nothing_to_do(repo):
    """The second extractor starts before the index is checked; a row gone from the index stops
    it unheard, the pipeline decides, and every output ends up as the task's artifact holds it."""
    ws = many(repo)
    drop_row(ws, "p19#build")
    result, replayed = run(ws)
    # The pipeline finds no row, and indexes the artifact again from its bytes (LC-13).
    assert not replayed and result.code == 0 and executed(result.err) == set()
    assert all(
        (ws.root / "packages" / f"p{i:02d}" / "dist/out.js").read_text() == f"P{i};"
        for i in range(20)
    )


def test_a_missing_artifact_is_never_replayed(ws):
    settle(ws)
    artifact = next((ws.root / ".vx" / "cache").glob("*.tar.zst"))
    artifact.unlink()
    result, replayed = run(ws)
    assert not replayed and result.code == 0


def test_another_command_line_has_its_own_receipt(ws):
    settle(ws)
    result, replayed = run(ws, "build", "--concurrency", "1")
    assert not replayed and result.code == 0
    _, replayed = run(ws)
    assert replayed


def test_replay_can_be_turned_off(ws):
    settle(ws)
    _, replayed = run(ws, env={"VX_REPLAY": "0"})
    assert not replayed


def test_a_focused_run_writes_no_receipt(ws):
    for _ in range(3):
        result, replayed = run(ws, cwd="packages/b")
        assert result.code == 0 and not replayed
    assert not (ws.root / ".vx" / "receipts").exists()


def test_a_failing_run_writes_no_receipt_and_drops_the_old_one(ws):
    settle(ws)
    assert list((ws.root / ".vx" / "receipts").iterdir())
    cfg = ws.root / "packages/a/vx.config.json"
    cfg.write_text(cfg.read_text().replace("node -e", "exit 3; node -e"))
    for _ in range(2):
        result, replayed = run(ws)
        assert result.code == 1 and not replayed
    assert [p.name for p in (ws.root / ".vx" / "receipts").iterdir()] == [".gitignore"]


@pytest.mark.parametrize("garbage", [b"", b"\x00\x01not marshal", b"\xe9" * 64])
def test_a_damaged_receipt_is_a_miss_not_an_error(ws, garbage):
    settle(ws)
    receipt_file(ws).write_bytes(garbage)
    result, replayed = run(ws)
    assert result.code == 0 and not replayed and "Traceback" not in result.err


def damaged(data: bytes, how: str) -> bytes:
    header_at = len(receipt.MAGIC) + receipt.MAC_SIZE + 4
    if how == "header-byte":
        i = header_at + 10
    elif how == "body-byte":
        i = len(data) - 20
    elif how == "mac-byte":
        i = len(receipt.MAGIC)
    else:
        return data[: len(data) // 2] if how == "torn" else os.urandom(len(data))
    return data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1 :]


@pytest.mark.feature("LC-12")
@pytest.mark.parametrize("how", ["header-byte", "body-byte", "mac-byte", "torn", "random"])
def test_a_receipt_damaged_anywhere_is_no_receipt(ws, how):
    """Item: receipts read with marshal. One flipped bit anywhere, a torn write, or bytes of the
    right size made up: the pipeline plans as if there were none, and gives its answer."""
    settle(ws)
    edit_tracked_input(ws)
    file = receipt_file(ws)
    file.write_bytes(damaged(file.read_bytes(), how))
    result, replayed = run(ws)
    assert result.code == 0 and not replayed and "Traceback" not in result.err
    assert executed(result.err) == {"a#build", "b#build"}
    assert (ws.root / "packages/a/dist/out.js").read_text() == "A2;"


@pytest.mark.feature("LC-12")
@pytest.mark.parametrize("planted", ["forged", "old"])
def test_a_planted_receipt_claiming_hits_for_changed_inputs_never_replays(ws, planted, monkeypatch):
    """Item: receipts read with marshal. A receipt is what says the hits hold, so one planted in
    `.vx/receipts` (an archive, a shared disk) must not vouch for a tree whose inputs changed:
    `forged` checks nothing (no paths, no git listings) and is sealed with a key that is not
    this user's; `old` is this user's own, copied aside before the change and put back."""
    settle(ws)
    file = receipt_file(ws)
    kept = file.read_bytes()
    edit_tracked_input(ws)
    if planted == "forged":
        header, body = opened(ws)
        monkeypatch.setattr(receipt, "_KEY", [os.urandom(receipt.KEY_SIZE)])
        forged = body | {"read": [], "probed": [], "views": []}
        assert receipt.store(str(file), header | {"git": [], "index": None}, forged)
        monkeypatch.setattr(receipt, "_KEY", [])
    else:
        result, replayed = run(ws)
        assert result.code == 0 and not replayed
        file.write_bytes(kept)
    result, replayed = run(ws)
    assert result.code == 0 and not replayed, result.err
    assert (ws.root / "packages/a/dist/out.js").read_text() == "A2;"


def hold_lock(ws, seconds: float) -> subprocess.Popen:
    """Another process holding the workspace's run lock for `seconds` (GR-16)."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from vx.runlock import RunLock; lock = RunLock(print); "
            f"lock.acquire(sys.argv[1]); print('held', flush=True); time.sleep({seconds}); lock.release(); "
            "print(time.time(), flush=True)",
            str(ws.root),
        ],
        env=vx_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_replay_waits_for_the_run_lock(ws):
    """GR-16: a replay takes turns with a run that holds the workspace's lock."""
    settle(ws)
    holder = hold_lock(ws, 1.5)
    _, replayed = run(ws)
    done = time.time()
    released = float(holder.stdout.readline())
    assert replayed and released <= done  # finished only once the holder let go
    holder.wait()


# ---------------------------------------------------------------- completeness

STRACE_CALLS = "openat,open,stat,lstat,newfstatat,statx,getdents64,readlink,readlinkat,access,faccessat,faccessat2"
_CALL = re.compile(r"^(\w+)\((.*)\)\s+=\s+-?\d+")
_AT = re.compile(r'^(?:AT_FDCWD(?:<[^>]*>)?|\d+<([^>]*)>)(?:, "((?:[^"\\]|\\.)*)")?')


def traced_paths(trace: Path, cwd: Path) -> set[str]:
    """Every path the traced process opened, stat'ed, listed or probed, made absolute."""
    out = set()
    for line in trace.read_text().splitlines():
        m = _CALL.match(line)
        if not m:
            continue
        name, args = m.groups()
        if name in ("open", "stat", "lstat", "access", "readlink"):
            path = os.path.join(cwd, args.split('"')[1])
        else:
            at = _AT.match(args)
            if not at:
                continue
            path = os.path.join(at.group(1) or str(cwd), at.group(2) or "")
        out.add(os.path.normpath(path))
    return out


def strace(argv: list[str], cwd: Path, trace: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["strace", "-qq", "-y", "-e", f"trace={STRACE_CALLS}", "-o", str(trace), *argv],
        cwd=cwd,
        env=vx_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def runtime_paths(cwd: Path, tmp: Path) -> tuple[set[str], tuple[str, ...]]:
    """What no receipt needs: whatever the interpreter touches to start and import vx's modules
    (a baseline trace), and everything under its import path."""
    code = "import sys, vx.prepare, vx.pipeline, vx.cli.main, vx.store.local, sqlite3, xxhash; print(repr(sys.path))"
    proc = strace([sys.executable, "-c", code], cwd, tmp / "baseline")
    dirs = tuple(os.path.join(os.path.abspath(d), "") for d in eval(proc.stdout) if d)
    return traced_paths(tmp / "baseline", cwd), dirs


def vx_own(path: str, root: Path) -> bool:
    """vx's own cache, receipts, lock and digest seed (vx.dotvx.env_digest), the kernel's files,
    git's executable as PATH finds it (PATH is in the receipt, and git's listings are compared
    whole), and the HEAD and refs the run history reads."""
    path_dirs = [d for d in os.environ.get("PATH", "").split(":") if d]
    seed_dir = os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "vx"
    )
    return (
        path.startswith(
            (
                "/dev/",
                "/proc/",
                "/sys/",
                "pipe:",
                tempfile.gettempdir() + "/vx-run-",
                seed_dir + "/",
                str(root / ".vx") + "/",
                str(root / ".git" / "refs") + "/",  # the run history's branch (below)
            )
        )
        or path == seed_dir
        or "/.vx/receipts/" in path
        or os.path.dirname(path) in path_dirs
        or path in (tempfile.gettempdir(), str(root / ".vx"))
        # the run history's commit and branch: metadata for `vx last`, no part of any result,
        # and read again by every replay itself
        or path in {str(root / ".git" / n) for n in ("HEAD", "commondir", "packed-refs")}
    )


def rich(repo):
    """More readers at work: a pnpm workspace file, the workspace config, an attributes file, a
    workspace-level input, a project nested in another, a dirty and an untracked input."""
    task = build_task()
    task["cache"]["inputs"]["workspaceFiles"] = ["scripts/*.js"]
    pkgs = {
        "a": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}},
        "b": {
            "deps": ["a"],
            "tasks": {"build": task},
            "files": {"src/b.js": "B;", "inner/package.json": "{}"},
        },
    }
    files = npm_workspace(pkgs)
    files.update(
        {
            "pnpm-workspace.yaml": "packages:\n  - packages/*\n",
            "vx.workspace.json": {"concurrency": 2},
            ".gitattributes": "*.png binary\n",
            "scripts/build.js": "// shared\n",
        }
    )
    repo.write(files).commit()
    (repo.root / "packages/a/src/a.js").write_text("A2;")
    (repo.root / "packages/b/src/untracked.js").write_text("U;")
    return repo


def with_ignored_inputs(repo):
    """Inputs git ignores (KEY-18): a `.env` named by a glob, and a gitignored `gen/` dir a glob
    reaches (walked), beside the usual sources."""
    task = build_task(inputs=("src/**", ".env", "gen/**"))
    pkgs = {
        "a": {
            "tasks": {"build": task},
            "files": {"src/a.js": "A;", ".env": "A=1\n", "gen/g.js": "G;"},
        },
        "b": {"deps": ["a"], "tasks": {"build": task}, "files": {"src/b.js": "B;"}},
    }
    files = npm_workspace(pkgs)
    files[".gitignore"] += ".env\ngen/\n"
    repo.write(files).commit()
    return repo


def with_linked_inputs(repo):
    """Inputs behind symlinks (KEY-12): a directory link in the workspace and a dirty file behind
    it, and a file linked from outside the workspace."""
    task = build_task(inputs=("src/**", "lib/**", "conf.js"))
    pkgs = {
        "a": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}},
        "b": {"deps": ["a"], "tasks": {"build": build_task()}, "files": {"src/b.js": "B;"}},
    }
    files = npm_workspace(pkgs)
    files.update({"shared/x.js": "X;", "shared/y.js": "Y;"})
    repo.write(files)
    os.symlink("../../shared", repo.root / "packages/a/lib")
    outside = repo.root.parent / "outside-conf.js"
    outside.write_text("C;")
    os.symlink(outside, repo.root / "packages/a/conf.js")
    repo.commit()
    (repo.root / "shared/y.js").write_text("Y2;")
    return repo


@pytest.mark.feature("KEY-18")
@pytest.mark.parametrize("change", ["edit-env", "edit-gen", "add-gen"])
def test_a_changed_ignored_input_is_never_replayed(repo, change):
    """A receipt vouches for an ignored input only by its own stat: git's listings pin nothing."""
    ws = with_ignored_inputs(repo)
    settle(ws)
    _, replayed = run(ws)
    assert replayed
    if change == "edit-env":
        (ws.root / "packages/a/.env").write_text("A=2\n")
    elif change == "edit-gen":
        (ws.root / "packages/a/gen/g.js").write_text("G2;")
    else:
        (ws.root / "packages/a/gen/h.js").write_text("H;")
    result, replayed = run(ws)
    assert not replayed and result.code == 0
    assert executed(result.err) == {"a#build", "b#build"}


@pytest.mark.parametrize("shape", ["plain", "rich", "ignored", "linked"])
def test_a_receipt_covers_every_path_its_run_read(repo, tmp_path, shape):
    """Whatever the run that writes a receipt looked at on disk — file, directory listing or mere
    existence, in the workspace or above it — the receipt checks again (strace is the witness)."""
    ws = {
        "plain": workspace,
        "rich": rich,
        "ignored": with_ignored_inputs,
        "linked": with_linked_inputs,
    }[shape](repo)
    run(ws)
    time.sleep(0.06)
    trace = tmp_path / "trace"
    proc = strace([sys.executable, "-m", "vx", "run", "build"], ws.root, trace)
    assert proc.returncode == 0, proc.stderr
    (written,) = [p for p in (ws.root / ".vx" / "receipts").iterdir() if p.name != ".gitignore"]
    found = receipt.unseal(memoryview(written.read_bytes()))
    assert found is not None
    body = receipt.body_of(*found)
    assert body is not None
    dirty = {line[3:] for line in ws.git("status", "--porcelain").splitlines()}
    vouched = (
        set(ws.git("ls-files").split()) - dirty
    )  # git's listings pin these: the receipt compares them whole
    outputs = [path for task in body["tasks"] for path, _ in task[3]]
    walked = [path for task in body["tasks"] for part in (task[5] or ()) for path, _ in part]
    checked = (
        {path for path, _ in body["read"] + body["probed"]}
        | {view[0] for view in body["views"]}
        | set(outputs)
        | set(walked)
        | {str(ws.root / rel) for rel in vouched}
    )
    seen = traced_paths(trace, ws.root)
    assert (
        str(ws.root / "packages/a/vx.config.json") in seen
        and str(ws.root / "packages/b/dist") in seen
    )
    if shape == "rich":
        assert {
            str(ws.root / p) for p in ("packages/a/src/a.js", "packages/b/src/untracked.js")
        } <= checked
    if shape == "linked":  # the links themselves, the dirty file behind one, the file outside
        assert {
            str(ws.root / p) for p in ("packages/a/lib", "packages/a/conf.js", "shared/y.js")
        } <= checked
        assert str(ws.root.parent / "outside-conf.js") in checked
    if shape == "ignored":  # read, so stat'ed by every replay: git vouches for none of them
        assert {
            str(ws.root / p) for p in ("packages/a/.env", "packages/a/gen/g.js", "packages/a/gen")
        } <= checked
    baseline, import_dirs = runtime_paths(ws.root, tmp_path)
    unchecked = sorted(
        p
        for p in seen - checked - baseline
        if not p.startswith(import_dirs) and not vx_own(p, ws.root)
    )
    assert unchecked == []


def imported(code: str, cwd: Path) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        cwd=cwd,
        env=vx_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return {
        line.split("|")[-1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }


def test_a_replay_loads_none_of_the_pipeline(ws):
    """The point of a receipt: none of the CLI, the records, `re`, `pathlib` or `subprocess`. The
    baseline is the interpreter with the few extension modules a replay uses (sqlite3's C module
    itself imports `functools`)."""
    settle(ws)
    baseline = imported(
        "import _blake2, _sqlite3, errno, fcntl, marshal, stat, xxhash, zlib", ws.root
    )
    replay = imported(
        "import sys; sys.argv = ['vx', 'run', 'build']; from vx.__main__ import entry; entry()",
        ws.root,
    )
    assert "vx.fastpath.replay" in replay and "vx.cli.main" not in replay  # replayed, then
    own = {
        "vx",
        "vx.__main__",
        "vx.fastpath.replay",
        "vx.fastpath.receipt",
        "vx.dotvx",  # the digest of a variable's value the receipt compares
        "vx.witness",
        "vx.runlock",
        "vx.stages",
        "vx.style",
        "vx.store",
        "vx.store.rows",
        "vx.store.runs",  # the run history's append (stdlib only)
        "_json",  # its C encoder
        "vx.fastpath",
        "__future__",
        "gc",  # built into the interpreter: the collector's switch (off while replaying)
    }
    assert replay - baseline <= own, sorted(replay - baseline - own)


def test_a_replay_restoring_outputs_loads_the_reader_and_none_of_the_records(ws):
    """Restoring deleted outputs adds the artifact reader on plain values, its `json` C scanner
    and zstd's C extension: no msgspec records, no `json.decoder` (and so no `re`), no
    `typing`, no `pathlib`, not the zstandard package's `__init__` nor `importlib`'s (with its
    `warnings`), and sqlite3's C module without `functools` (docs/optimizations.md #22, #26). What
    the interpreter's own start loads (a site `.pth` may import half the stdlib) is not vx's."""
    settle(ws)
    startup = imported("pass", ws.root)
    baseline = imported(
        "import _blake2, _sqlite3, errno, fcntl, marshal, stat, xxhash, zlib", ws.root
    )
    for dist in ws.root.glob("packages/*/dist"):
        shutil.rmtree(dist)
    replay = imported(
        "import sys; sys.argv = ['vx', 'run', 'build']; from vx.__main__ import entry; entry()",
        ws.root,
    )
    assert all(
        (ws.root / "packages" / p / "dist" / "out.js").is_file() for p in "ab"
    )  # restored, by
    assert (
        "vx.fastpath.replay" in replay
        and "vx.store.unpacking" in replay
        and "vx.cli.main" not in replay
    )  # the replay
    assert not {"functools", "collections", "importlib", "warnings", "struct", "types"} & (
        replay - startup
    )
    reader = {
        "vx.fastpath.restores",
        "vx.store.unpacking",
        "vx.store.archive",
        "vx.store.zstd",
        "vx.errors",
        "zstandard.backend_c",
        "_json",
        "vx.store.rows",
    }
    own = {
        "vx",
        "vx.__main__",
        "vx.fastpath.replay",
        "vx.fastpath.receipt",
        "vx.dotvx",  # the digest of a variable's value the receipt compares
        "vx.witness",
        "vx.runlock",
        "vx.stages",
        "vx.style",
        "vx.store",
        "vx.store.runs",  # the run history's append (stdlib only)
        "vx.fastpath",
        "__future__",
        "gc",  # built into the interpreter: the collector's switch (off while replaying)
    }
    assert replay - baseline <= own | reader, sorted(replay - baseline - own - reader)


def test_a_run_with_a_sandboxed_task_writes_no_receipt(repo):
    """Planning a sandbox resolves its grants against the disk (SB-04) with reads no witness
    notes, so such a run is never replayed: a grant gone bad must still be refused."""
    task = build_task()
    task["exec"]["sandbox"] = {"allow": {"read": ["src/**"], "write": ["dist/"]}}
    ws = repo.write(
        npm_workspace({"a": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}}})
    ).commit()
    for _ in range(3):
        result, replayed = run(ws)
        assert result.code == 0 and not replayed, result.err
    assert not (ws.root / ".vx" / "receipts").exists() or not any(
        p.name != ".gitignore" for p in (ws.root / ".vx" / "receipts").iterdir()
    )


def test_ctrl_c_during_a_replay_exits_130_without_a_traceback(ws):
    """The replay waits for the run lock here, and is interrupted there."""
    import signal

    settle(ws)
    holder = hold_lock(ws, 600)
    try:
        replay = subprocess.Popen(
            [sys.executable, "-m", "vx", "run", "build"],
            cwd=ws.root,
            env=vx_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        stderr = Stderr(replay)
        stderr.wait_for("waiting for another vx run")  # the replay is waiting for the lock now
        replay.send_signal(signal.SIGINT)
        err = stderr.finish()
    finally:
        holder.kill()
        holder.wait()
    assert replay.returncode == 130 and "Traceback" not in err, err


def test_a_replay_runs_git_without_the_optional_index_lock(ws, tmp_path):
    """A replay that gives up early stops the git it started. `git status` would hold
    .git/index.lock by then, and a SIGTERM just as it takes it leaves the repository locked; so
    the replay's git runs with GIT_OPTIONAL_LOCKS=0. The pipeline's listing, never stopped in a
    normal run, still writes refreshed stat data back (the variable unset)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "git.log"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(
        f'#!/bin/sh\necho "${{GIT_OPTIONAL_LOCKS:-unset}} $*" >> {log}\nexec {shutil.which("git")} "$@"\n'
    )
    (bin_dir / "git").chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    settle(ws, env=env)
    edit_tracked_input(ws)
    time.sleep(0.06)
    log.write_text("")
    result, replayed = run(ws, env=env)
    assert not replayed and result.code == 0
    lines = [line.split() for line in log.read_text().splitlines()]
    replays = {words[3]: words[0] for words in lines if words[1] == "-C"}  # command -> the variable
    assert replays["ls-files"] == replays["status"] == "0"  # both waited for: it missed on status
    assert replays.get("config", "0") == "0"  # stopped, perhaps before its wrapper logged a line
    assert [words[0] for words in lines if words[1] == "status"] == ["unset"]  # the pipeline's own
    assert not (ws.root / ".git" / "index.lock").exists()


@pytest.mark.feature("LC-12")
def test_a_relative_cache_home_keeps_the_receipt_key_out_of_the_workspace(ws, tmp_path):
    """Item: review of the receipt key. `XDG_CACHE_HOME=.cache` (as a CI job may set it) put the
    receipt key and the digest seed under the directory vx ran in, in the workspace — where an
    archive or a CI cache of the tree takes them — and made a new key in each directory run
    from. As the XDG rule says, a relative XDG_CACHE_HOME is ignored: the key is in the home's."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_CACHE_HOME": ".cache"}
    settle(ws, env=env)
    again, replayed = run(ws, env=env)
    assert again.code == 0 and replayed, again.err
    assert not (ws.root / ".cache").exists()
    assert {"digest-seed", "receipt-key"} <= {p.name for p in (home / ".cache" / "vx").iterdir()}


def test_a_warm_run_many_replays_as_run_does(ws):
    """`vx run-many -t build` (Nx's verb, what a bench against `nx run-many` runs) writes a
    receipt like `vx run build`; only `run` was ever replayed, so run-many always went the whole
    pipeline."""
    settle(ws, "-t", "build", verb="run-many")
    again, replayed = run(ws, "-t", "build", verb="run-many")
    assert replayed and again.code == 0, again.err


@pytest.mark.parametrize("verb", ["run", "run-many"])
def test_a_workspace_that_does_not_ignore_dot_vx_replays_every_warm_run(repo, verb):
    """A workspace whose .gitignore does not name `.vx` (every one made before vx, e.g. an Nx
    workspace's) gets each `.vx` file listed by `git status --ignored=matching` through the `*`
    .gitignore vx keeps in each of its directories. A replay leaves `cache.db-wal`,
    `cache.db-shm` and `runs.pending` there and the next pipeline run folds them away, so
    receipts failed on their own state: found on nx-recipes' angular-monorepo, where 2 of 6
    warm runs were replayed."""
    files = npm_workspace({"a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}}})
    files[".gitignore"] = "node_modules/\ndist/\n"
    repo.write(files).commit()
    args = ("-t", "build") if verb == "run-many" else ("build",)
    settle(repo, *args, verb=verb)
    for _ in range(3):
        again, replayed = run(repo, *args, verb=verb)
        assert replayed and again.code == 0, again.err
