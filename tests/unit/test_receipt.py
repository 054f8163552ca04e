"""The pure rules under receipts: the racy window, identities, the environment's witness."""

from __future__ import annotations

import os
import time

from vx import receipt, witness


def body_of(path: str) -> dict:
    return {"read": [(path, witness.identity(path, True))], "probed": []}


def test_a_path_changed_inside_the_racy_window_of_the_run_start_is_racy(tmp_path):
    # Its stat would still equal the receipt's after an edit in the same tick.
    f = tmp_path / "a.json"
    f.write_text("{}")
    read = body_of(str(f))["read"]
    assert receipt._racy(read, time.time_ns())
    assert not receipt._racy(read, time.time_ns() + 2 * witness.RACY_NS)  # a run that started well after


def test_whole_second_timestamps_widen_the_window():
    ident = (0o100644, 3, 5_000_000_000, 5_000_000_000, 1)
    assert receipt._racy([("a", ident)], 5_000_000_000 + witness.RACY_NS * 2)
    assert not receipt._racy([("a", ident)], 5_000_000_000 + witness.COARSE_RACY_NS + 1)


def test_a_changed_or_vanished_path_never_holds(tmp_path):
    f = tmp_path / "a.json"
    f.write_text("{}")
    old = time.time_ns() - 10 * witness.RACY_NS
    os.utime(f, ns=(old, old))
    held = body_of(str(f))
    assert receipt._paths_hold(held)
    f.write_text('{"x": 1}')
    os.utime(f, ns=(old, old))  # the mtime forged back: size and ctime still differ
    assert not receipt._paths_hold(held)
    f.unlink()
    assert not receipt._paths_hold(held)


def test_a_missing_path_holds_while_it_stays_missing(tmp_path):
    held = body_of(str(tmp_path / "pnpm-workspace.yaml"))
    assert held["read"][0][1] is None and receipt._paths_hold(held)
    (tmp_path / "pnpm-workspace.yaml").write_text("packages: []\n")
    assert not receipt._paths_hold(held)


def test_a_probed_path_keeps_only_its_kind_and_inode(tmp_path):
    d = tmp_path / "pkg"
    d.mkdir()
    held = {"read": [], "probed": [(str(d), witness.identity(str(d), False))]}
    (d / "new").write_text("x")  # the directory's mtime moves; its kind and inode do not
    assert receipt._paths_hold(held)
    assert not receipt._paths_hold(body_of(str(d)) | {"read": [(str(d), held["probed"][0][1])]})
    d.rename(tmp_path / "moved")
    d.mkdir()  # a new directory in its place: another inode
    assert not receipt._paths_hold(held)


def test_read_env_notes_each_name_looked_up_and_a_whole_read():
    env = witness.ReadEnv({"A": "1", "B": "2"})
    assert env.get("A") == "1" and "C" not in env and env["B"] == "2"
    assert env.names == {"A", "B", "C"} and not env.whole
    dict(env)
    assert env.whole


def test_the_witness_notes_only_while_watching():
    witness.read("/x")
    witness.watch()
    witness.read("/a")
    witness.probed("/a")  # already read whole: stays whole
    witness.probed("/b")
    paths, commands = witness.taken()
    assert paths == {"/a": True, "/b": False} and commands == []
    witness.read("/y")
    assert witness.taken() == ({}, [])
