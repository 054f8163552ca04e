"""The pure rules under receipts: the racy window, identities, the environment's witness."""

from __future__ import annotations

import os
import time

from vx import receipt, witness


def receipt_of(path: str, started_ns: int) -> dict:
    return {"paths": [(path, True, witness.identity(path, True))], "started_ns": started_ns}


def test_a_path_older_than_the_window_holds(tmp_path):
    f = tmp_path / "a.json"
    f.write_text("{}")
    later = time.time_ns() + 2 * witness.RACY_NS  # a run that started well after the last change
    assert receipt._paths_hold(receipt_of(str(f), later))


def test_a_path_inside_the_racy_window_of_the_run_start_never_holds(tmp_path):
    # Its stat equals the receipt's, but an edit in the same tick would have left it equal too.
    f = tmp_path / "a.json"
    f.write_text("{}")
    assert not receipt._paths_hold(receipt_of(str(f), time.time_ns()))


def test_a_changed_or_vanished_path_never_holds(tmp_path):
    f = tmp_path / "a.json"
    f.write_text("{}")
    old = time.time_ns() - 10 * witness.RACY_NS
    os.utime(f, ns=(old, old))
    held = receipt_of(str(f), time.time_ns() + 2 * witness.RACY_NS)
    assert receipt._paths_hold(held)
    f.write_text('{"x": 1}')
    os.utime(f, ns=(old, old))  # same mtime forged back: size and ctime still differ
    assert not receipt._paths_hold(held)
    f.unlink()
    assert not receipt._paths_hold(held)


def test_a_missing_path_holds_while_it_stays_missing(tmp_path):
    held = receipt_of(str(tmp_path / "pnpm-workspace.yaml"), time.time_ns())
    assert held["paths"][0][2] is None and receipt._paths_hold(held)
    (tmp_path / "pnpm-workspace.yaml").write_text("packages: []\n")
    assert not receipt._paths_hold(held)


def test_a_probed_path_keeps_only_its_kind_and_inode(tmp_path):
    d = tmp_path / "pkg"
    d.mkdir()
    before = witness.identity(str(d), False)
    (d / "new").write_text("x")  # the directory's mtime moves; its kind and inode do not
    assert witness.identity(str(d), False) == before
    assert witness.identity(str(d), True) != before


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
