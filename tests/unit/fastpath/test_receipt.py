"""The pure rules under receipts: the racy window, identities, the environment's witness."""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vx import witness
from vx.fastpath import receipt


def body_of(path: str) -> dict:
    return {"read": [(path, witness.identity(path, True))], "probed": [], "views": []}


def test_a_path_changed_inside_the_racy_window_of_the_run_start_is_racy(tmp_path):
    # Its stat would still equal the receipt's after an edit in the same tick.
    f = tmp_path / "a.json"
    f.write_text("{}")
    read = body_of(str(f))["read"]
    assert receipt.racy(read, time.time_ns())
    assert not receipt.racy(
        read, time.time_ns() + 2 * witness.RACY_NS
    )  # a run that started well after


def test_whole_second_timestamps_widen_the_window():
    ident = (0o100644, 3, 5_000_000_000, 5_000_000_000, 1)
    assert receipt.racy([("a", ident)], 5_000_000_000 + witness.RACY_NS * 2)
    assert not receipt.racy([("a", ident)], 5_000_000_000 + witness.COARSE_RACY_NS + 1)


def test_a_changed_or_vanished_path_never_holds(tmp_path):
    f = tmp_path / "a.json"
    f.write_text("{}")
    old = time.time_ns() - 10 * witness.RACY_NS
    os.utime(f, ns=(old, old))
    held = body_of(str(f))
    assert receipt.paths_hold(held)
    f.write_text('{"x": 1}')
    os.utime(f, ns=(old, old))  # the mtime forged back: size and ctime still differ
    assert not receipt.paths_hold(held)
    f.unlink()
    assert not receipt.paths_hold(held)


def test_a_missing_path_holds_while_it_stays_missing(tmp_path):
    held = body_of(str(tmp_path / "pnpm-workspace.yaml"))
    assert held["read"][0][1] is None and receipt.paths_hold(held)
    (tmp_path / "pnpm-workspace.yaml").write_text("packages: []\n")
    assert not receipt.paths_hold(held)


def test_a_probed_path_keeps_only_its_kind_and_inode(tmp_path):
    d = tmp_path / "pkg"
    d.mkdir()
    held = {"read": [], "probed": [(str(d), witness.identity(str(d), False))], "views": []}
    (d / "new").write_text("x")  # the directory's mtime moves; its kind and inode do not
    assert receipt.paths_hold(held)
    assert not receipt.paths_hold(body_of(str(d)) | {"read": [(str(d), held["probed"][0][1])]})
    d.rename(tmp_path / "moved")
    d.mkdir()  # a new directory in its place: another inode
    assert not receipt.paths_hold(held)


def test_read_env_notes_each_name_looked_up_and_a_whole_read():
    env = witness.ReadEnv({"A": "1", "B": "2"})
    assert env.get("A") == "1" and "C" not in env and env["B"] == "2"
    assert env.names == {"A", "B", "C"} and not env.whole
    dict(env)
    assert env.whole


def test_the_witness_notes_only_while_watching():
    witness.read("/x")
    witness.start()
    witness.read("/a")
    witness.probed("/a")  # already read whole: stays whole
    witness.probed("/b")
    witness.listed("/d", "vx.config", ["package.json", "vx.config.json", "src"])
    paths, commands, views = witness.stop()
    assert (
        paths == {"/a": True, "/b": False}
        and commands == []
        and views == {"/d": ("vx.config", ["vx.config.json"])}
    )
    witness.read("/y")
    assert witness.stop() == ({}, [], {})


def test_a_listed_directory_holds_while_its_config_names_stay(tmp_path):
    d = tmp_path / "pkg"
    d.mkdir()
    (d / "vx.config.json").write_text("{}")
    held = {
        "read": [],
        "probed": [],
        "views": [(str(d), witness.identity(str(d), True), "vx.config", ["vx.config.json"])],
    }
    assert receipt.paths_hold(held)
    (d / "dist").mkdir()  # the listing changed, not its config names
    assert receipt.paths_hold(held)
    (d / "vx.config.ts").write_text("export default {}")
    assert not receipt.paths_hold(held)


def test_outputs_are_current_absent_or_changed(tmp_path):
    dist = tmp_path / "dist"
    dist.mkdir()
    out = dist / "out.js"
    out.write_text("x")
    want = witness.output_stat(os.lstat(out))
    walked = [[(str(dist), witness.identity(str(dist), True))], []]
    task = ["k", 1, "c", [(str(out), want)], [str(dist)], walked]
    assert receipt.output_state(task) == receipt.CURRENT
    (dist / "extra.js").write_text("y")  # a file the walk would find: not current any more
    assert receipt.output_state(task) == receipt.CHANGED
    for f in dist.iterdir():
        f.unlink()
    dist.rmdir()
    assert receipt.output_state(task) == receipt.ABSENT
    assert (
        receipt.output_state(["k", 1, "c", [], [], None]) == receipt.CHANGED
    )  # no root: never absent


def test_a_replay_stops_git_with_a_signal_it_can_clean_up_after(tmp_path):
    """A replay that gives up early stops the git it started. SIGKILL would leave a `git status`
    holding .git/index.lock no chance to remove it, and the user's repository locked."""
    import sys

    from vx.fastpath import replay

    lock, ready, git = tmp_path / "index.lock", tmp_path / "ready", tmp_path / "git"
    git.write_text(
        f"#!{sys.executable}\n"  # a git stand-in: `-C dir` as git takes it, then holds a lock
        "import os, signal, sys, time\n"
        "assert sys.argv[1] == '-C'; os.chdir(sys.argv[2])\n"
        "signal.signal(signal.SIGTERM, lambda *a: (os.unlink('index.lock'), sys.exit(1)))\n"
        "open('index.lock', 'w').close(); open('ready', 'w').close(); time.sleep(30)\n"
    )
    git.chmod(0o755)
    children = replay._spawn_git(
        str(tmp_path), [[[str(git), "status"], 0, "", None]], dict(os.environ)
    )
    deadline = time.monotonic() + 120
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lock.exists()
    replay._reap(children)
    assert not lock.exists()


def test_a_workspace_keeps_only_its_most_recent_receipts(tmp_path, monkeypatch):
    monkeypatch.setattr(receipt, "KEEP", 3)
    directory = tmp_path / ".vx" / "receipts"
    for i in range(5):
        assert receipt.store(str(directory / f"r{i}"), {"i": i}, {})
        os.utime(directory / f"r{i}", ns=(i * 10**9, i * 10**9))  # r4 is the most recent
    assert sorted(p.name for p in directory.iterdir()) == [".gitignore", "r2", "r3", "r4"]


def helper_tasks(tmp_path, n: int) -> tuple[str, str, list]:
    """`n` real artifacts in a cache dir, and receipt task records naming their one output each."""
    from vx.store import packing

    root, cache = tmp_path / "ws", tmp_path / "cache"
    cache.mkdir()
    tasks = []
    for i in range(n):
        out = root / f"p{i}" / "dist" / "out.js"
        out.parent.mkdir(parents=True)
        out.write_text(f"P{i};")
        key = f"k{i:04d}"
        info = packing.pack(
            cache / f"{key}.tar.zst", key=key, log=[], files=[(f"p{i}/dist/out.js", out)]
        )
        tasks.append([key, info.size_bytes, info.crc, [(str(out), None)], [], None])
        out.unlink()
    return str(cache), str(root), tasks


def outputs_of(tmp_path, n: int) -> list[str | None]:
    """The text of each helper_tasks output, None where there is none."""
    paths = [tmp_path / "ws" / f"p{i}" / "dist" / "out.js" for i in range(n)]
    return [p.read_text() if p.exists() else None for p in paths]


def test_the_second_extractor_restores_its_share_at_once_and_reports_it(tmp_path):
    from vx.fastpath.restores import Helper as _Helper

    cache, root, tasks = helper_tasks(tmp_path, 3)
    helper = _Helper(cache, root, tasks)
    done = helper.result()
    helper.stop()
    assert sorted(done) == ["k0000", "k0001", "k0002"]
    st = os.lstat(
        tmp_path / "ws" / "p1" / "dist" / "out.js"
    )  # stamped by the process that wrote it
    mode = 0o666 & ~current_umask()
    assert done["k0001"] == [
        ("p1/dist/out.js", mode, 3, done["k0001"][0][3], st.st_ino, st.st_ctime_ns)
    ]
    assert outputs_of(tmp_path, 3) == ["P0;", "P1;", "P2;"]


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_queue_gives_each_restore_to_exactly_one_taker(tmp_path):
    """Both processes take from one queue; whoever is free takes the next. Past a page of
    numbers, a number stands for several restores."""
    import marshal

    from vx.fastpath.restores import Queue as _Queue

    for n in (8, 1024, 3000):
        tasks = list(range(n))
        queue = _Queue(tasks)
        taker = iter(queue)
        first = [next(taker) for _ in range(5)]
        theirs = tmp_path / f"theirs-{n}"
        pid = os.fork()
        if pid == 0:  # another process takes what is left, as the helper does
            theirs.write_bytes(marshal.dumps(list(queue)))
            os._exit(0)
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        mine = first + list(taker)
        queue.close()
        taken = marshal.loads(theirs.read_bytes())
        assert taken and sorted(mine + taken) == tasks  # each exactly once, some by the other


def test_a_stop_is_heard_between_artifacts_never_within_one(tmp_path):
    """A check failing while the restores run drains the queue: the artifact at hand is finished
    (a restore is all or nothing), and no other is begun."""
    from vx.fastpath.restores import Queue as _Queue
    from vx.fastpath.restores import extract as _extract

    cache, root, tasks = helper_tasks(tmp_path, 3)
    queue = _Queue(tasks)

    def taking():
        for task in queue:
            yield task
            queue.drain()  # heard once the first artifact is taken

    assert sorted(_extract(cache, root, taking())) == ["k0000"]
    queue.close()
    assert outputs_of(tmp_path, 3) == ["P0;", None, None]


def test_a_stopped_helper_has_exited_when_stop_returns(tmp_path):
    from vx.fastpath.restores import Helper as _Helper

    cache, root, tasks = helper_tasks(tmp_path, 40)
    helper = _Helper(cache, root, tasks)
    pid = helper._pid
    helper.stop()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: nothing of it is left to write
    after = outputs_of(tmp_path, 40)
    assert all(text in (None, f"P{i};") for i, text in enumerate(after))
    time.sleep(0.1)
    assert outputs_of(tmp_path, 40) == after


def test_the_second_extractor_reports_a_refused_artifact(tmp_path):
    from vx.fastpath.restores import Helper as _Helper

    cache, root, tasks = helper_tasks(tmp_path, 2)
    damaged = os.path.join(cache, "k0001.tar.zst")
    data = bytearray(open(damaged, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(damaged, "wb").write(bytes(data))
    helper = _Helper(cache, root, tasks)
    assert helper.result() is None
    helper.stop()


def test_env_digests_are_seeded_per_user_outside_the_workspace(tmp_path, monkeypatch):
    """A short secret cannot be found again from `.vx/` by trying candidates without the seed."""
    import stat as stat_mod

    from vx import dotvx as rc

    digests = []
    for home in ("one", "two"):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / home))
        monkeypatch.setattr(rc, "_SEED", [])
        digests.append(rc.env_digest("1234"))
        seed = tmp_path / home / "vx" / "digest-seed"
        assert seed.stat().st_size == 8 and stat_mod.S_IMODE(seed.stat().st_mode) == 0o600
    assert digests[0] != digests[1] and "1234" not in digests[0]
    monkeypatch.setattr(rc, "_SEED", [])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "one"))
    assert (
        rc.env_digest("1234") == digests[0] and rc.env_digest(None) is None
    )  # read again, same seed


# ---------------------------------------------------------------- the seal


@pytest.fixture
def sealed(tmp_path, monkeypatch):
    """A receipt written by `store` under a fresh user key: (path, its bytes, header, body)."""
    from vx.fastpath import receipt as rc

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(rc, "_KEY", [])
    header = {"format": rc.FORMAT, "vx": "0", "cwd": "/w", "argv": ["run"], "root": "/w"}
    body = {"read": [("/w/a", (0o100644, 3, 1, 2, 3))], "probed": [], "views": [], "tasks": []}
    path = tmp_path / "ws" / "receipt"
    assert rc.store(str(path), header, body)
    return path, path.read_bytes(), header, body


def decoded(data: bytes):
    """What a replay makes of these bytes: (header, body), or None for no receipt."""
    from vx.fastpath import receipt as rc

    opened = rc.unseal(memoryview(data))
    if opened is None:
        return None
    body = rc.body_of(*opened)
    return None if body is None else (opened[0], body)


def test_a_sealed_receipt_reads_back_as_written(sealed):
    _path, data, header, body = sealed
    got = decoded(data)
    assert got is not None and got[1] == body
    assert {k: got[0][k] for k in header} == header


@settings(max_examples=400, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    change=st.one_of(
        st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
        st.tuples(st.just("cut"), st.integers(0, 10**6), st.just(0)),
        st.tuples(st.just("insert"), st.integers(0, 10**6), st.integers(0, 255)),
        st.tuples(st.just("random"), st.binary(max_size=600), st.just(0)),
    )
)
def test_any_damaged_receipt_is_no_receipt(sealed, change):
    """Item: receipts read with marshal. Bytes torn, flipped, cut short or made up are no
    receipt — never an exception, a huge object or a hit — and only bytes this user's vx sealed
    reach the decoder."""
    _path, data, _header, _body = sealed
    kind, at, value = change
    if kind == "random":
        damaged = at
    else:
        i = at % (len(data) + (kind == "insert"))
        if kind == "flip":
            damaged = data[:i] + bytes([data[i] ^ value]) + data[i + 1 :]
        elif kind == "cut":
            damaged = data[:i]
        else:
            damaged = data[:i] + bytes([value]) + data[i:]
    assert damaged != data
    assert decoded(damaged) is None


def test_a_receipt_sealed_with_another_key_is_no_receipt(sealed, monkeypatch):
    """A receipt planted by an archive or another user, well formed in every field, was
    sealed with a key that is not this user's: it is never decoded."""
    from vx.fastpath import receipt as rc

    path, data, header, body = sealed
    monkeypatch.setattr(rc, "_KEY", [os.urandom(rc.KEY_SIZE)])
    assert rc.store(str(path), header, body | {"read": []})
    monkeypatch.setattr(rc, "_KEY", [])  # this user's key, read again
    assert decoded(path.read_bytes()) is None and decoded(data) is not None


@pytest.mark.parametrize("problem", ["readable by others", "a symlink", "short"])
def test_a_key_file_that_is_not_the_users_own_turns_receipts_off(tmp_path, monkeypatch, problem):
    from vx.fastpath import receipt as rc

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(rc, "_KEY", [])
    key = tmp_path / "vx" / "receipt-key"
    key.parent.mkdir()
    other = tmp_path / "other"
    other.write_bytes(os.urandom(rc.KEY_SIZE))
    other.chmod(0o600)
    if problem == "readable by others":
        key.write_bytes(os.urandom(rc.KEY_SIZE))
        key.chmod(0o644)
    elif problem == "a symlink":
        key.symlink_to(other)
    else:
        key.write_bytes(b"x")
        key.chmod(0o600)
    assert not rc.store(str(tmp_path / "r"), {"format": rc.FORMAT}, {"tasks": []})
    assert not (tmp_path / "r").exists()


def test_the_key_is_made_once_owner_only(tmp_path, monkeypatch):
    import stat as stat_mod

    from vx.fastpath import receipt as rc

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(rc, "_KEY", [])
    first = rc._key()
    key = tmp_path / "vx" / "receipt-key"
    assert first is not None and key.read_bytes() == first
    assert stat_mod.S_IMODE(key.stat().st_mode) == 0o600
    monkeypatch.setattr(rc, "_KEY", [])
    assert rc._key() == first and [p.name for p in key.parent.iterdir()] == ["receipt-key"]


def test_a_receipt_mac_is_compared_in_constant_time(tmp_path, monkeypatch):
    """Both MACs, the header's and the body's, go through the constant-time comparison (what
    hmac.compare_digest is), never a short-circuiting `==`; a MAC off in its last byte is refused
    as one off in its first."""
    import _operator
    import hmac
    import marshal

    monkeypatch.setattr(receipt, "_key", lambda: b"k" * 32)
    compared: list[tuple[bytes, bytes]] = []

    def spy(a, b):
        compared.append((bytes(a), bytes(b)))
        return hmac.compare_digest(a, b)

    monkeypatch.setattr(_operator, "_compare_digest", spy)
    path = str(tmp_path / "r")
    assert receipt.store(path, {"format": 1}, {"tasks": []})
    with open(path, "rb") as f:
        data = f.read()
    sealed = receipt.unseal(memoryview(data))
    assert sealed is not None
    header, body = sealed
    assert receipt.body_of(header, body) == {"tasks": []}
    assert len(compared) == 2  # the header's MAC, then the body's
    at = len(receipt.MAGIC)
    for flip in (at, at + receipt.MAC_SIZE - 1):  # the MAC's first byte, then its last
        forged = bytearray(data)
        forged[flip] ^= 1
        assert receipt.unseal(memoryview(bytes(forged))) is None
    body_mac = header["body"]
    first, last = bytes([body_mac[0] ^ 1]) + body_mac[1:], body_mac[:-1] + bytes([body_mac[-1] ^ 1])
    for forged_mac in (first, last, None):
        assert receipt.body_of({**header, "body": forged_mac}, body) is None
    assert len(compared) == 6  # each forgery compared, and none of them by `==`
    assert marshal.loads(body) == {"tasks": []}


def test_a_replay_runs_without_the_collector_and_the_pipeline_plans_without_it(monkeypatch):
    """`vx.__main__` turns the collector off for the replay (which ends in `os._exit`) and
    leaves it off when the replay hands the run to the pipeline: the CLI's imports and the
    planning keep what they make, and the walk turns it on (`_collect_from_here`, below)."""
    import gc
    import sys

    import vx.cli.main
    import vx.fastpath.replay
    from vx import __main__ as main

    seen: list[tuple[str, bool]] = []

    def replay(argv):
        seen.append(("replay", gc.isenabled()))
        return None  # a miss: on to the pipeline

    monkeypatch.setattr(vx.fastpath.replay, "replay", replay)
    monkeypatch.setattr(vx.cli.main, "entry", lambda: seen.append(("pipeline", gc.isenabled())))
    monkeypatch.setattr(sys, "argv", ["vx", "run", "build"])
    assert gc.isenabled()
    try:
        main.entry()
    finally:
        gc.enable()
    assert seen == [("replay", False), ("pipeline", False)]


def test_the_walk_gets_the_collector_back_with_what_planning_made_frozen_out():
    """The pipeline, which makes and drops cycles for as long as its tasks run, collects from
    the walk on; start-up's and planning's objects are frozen out of every pass. An in-process
    caller's collector (on) is left as it is, nothing frozen."""
    import gc

    from vx.cli.run import _collect_from_here

    frozen = gc.get_freeze_count()
    gc.disable()
    try:
        _collect_from_here()
        assert gc.isenabled() and gc.get_freeze_count() > frozen
        gc.unfreeze()
        _collect_from_here()
        assert gc.isenabled() and gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()
        gc.enable()


def test_a_covered_task_is_restored_only_with_its_covering_one(tmp_path):
    """A task restored through a covering dependant (`receipt.to_restore`) needs that one
    restored in the same replay; alone, its own artifact is not what the receipt vouches for."""
    gone, here = str(tmp_path / "gone"), str(tmp_path)
    build = ["b", 1, "c", [("f", ())], [gone], None, None]
    upstream = ["u", 1, "c", [], [gone], None, "b"]
    plain = ["p", 1, "c", [("g", ())], [gone], None]  # a record of six: no covering key
    assert receipt.to_restore([upstream, build, plain]) == ([build, plain], [upstream])
    assert receipt.to_restore([upstream, plain]) is None
    present = ["b", 1, "c", [("f", ())], [here], None, None]  # not absent: changed
    assert receipt.to_restore([upstream, present]) is None
    chained = ["v", 1, "c", [], [gone], None, "u"]  # covered by a covered one: not vouched for
    assert receipt.to_restore([chained, upstream, build]) is None
    assert receipt.to_restore([plain]) == ([plain], [])


def test_a_directory_listed_for_two_config_files_keeps_both_names():
    """The root is listed for `vx.workspace` and for `vx.config`: the receipt's view of it holds
    both (before, the second listing's prefix replaced the first's)."""
    from vx import witness

    names = ["package.json", "vx.workspace.json", "vx.config.json", "dist"]
    witness.start()
    witness.listed("/ws", "vx.workspace", names)
    witness.listed("/ws", ("vx.config", "turbo.json"), names)
    views = witness.stop()[2]
    prefix, kept = views["/ws"]
    assert kept == ["vx.config.json", "vx.workspace.json"]
    assert "vx.workspace.jsonc".startswith(prefix)  # one added later is a change


def test_a_config_file_made_between_two_listings_of_one_directory_is_a_change():
    """`vx.workspace.json` created after the root's listing for `vx.workspace` and before its
    listing for `vx.config`: planning read no workspace file, so the view must not hold it (a
    replay finding it would vouch for a plan made without it). Before, the second listing's
    names stood for both prefixes: the view held it, and one taken away between was lost."""
    from vx import witness

    witness.start()
    witness.listed("/ws", "vx.workspace", ["package.json", "vx.config.json", "vx.workspace.jsonc"])
    witness.listed("/ws", "vx.config", ["package.json", "vx.config.json", "vx.workspace.json"])
    prefix, kept = witness.stop()[2]["/ws"]
    assert kept == ["vx.config.json", "vx.workspace.jsonc"]
    assert prefix == ("vx.workspace", "vx.config")
