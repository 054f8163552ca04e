"""The key history behind `vx why` (OBS-06): what is kept, when, and how two records differ."""

from __future__ import annotations

import json
import sqlite3

import pytest

from vx.model import HashRecord
from vx.store.history import KEEP, differences, last_two, record_keys


def rec(
    files=(("src/a.js", "1"),),
    env=(("API", "secret-value"),),
    upstream=(),
    config="{}",
    args=("--token=arg-secret",),
) -> HashRecord:
    return HashRecord(
        task_id="a#build",
        fingerprint="fp",
        package_json="pkg",
        config=config,
        forward_args=args,
        env=env,
        upstream=upstream,
        files=files,
    )


def db():
    return sqlite3.connect(":memory:", isolation_level=None)


@pytest.mark.feature("OBS-06")
def test_a_run_whose_keys_did_not_move_writes_nothing_and_a_revert_is_newest_again():
    d = db()
    assert record_keys(d, [("k1", rec())]) == 1
    assert record_keys(d, [("k1", rec())]) == 0  # the warm run
    assert record_keys(d, [("k2", rec(files=(("src/a.js", "2"),)))]) == 1
    assert record_keys(d, [("k1", rec())]) == 1  # reverted: k1 is the newest again, not a new row
    assert [key for key, _at, _r in last_two(d, "a#build")] == ["k1", "k2"]
    assert d.execute("SELECT COUNT(*) FROM key_history").fetchone()[0] == 2


@pytest.mark.feature("OBS-06")
def test_only_the_last_keys_are_kept_and_env_values_never_are():
    d = db()
    for i in range(KEEP + 3):
        record_keys(d, [(f"k{i}", rec(files=(("src/a.js", str(i)),)))])
    assert d.execute("SELECT COUNT(*) FROM key_history").fetchone()[0] == KEEP
    stored = d.execute("SELECT record FROM key_history").fetchall()
    assert all(
        "secret-value" not in r[0] and "arg-secret" not in r[0] for r in stored
    )  # digests only
    assert json.loads(stored[0][0])["env"]["API"] != "secret-value"


@pytest.mark.feature("OBS-06")
def test_differences_name_each_component_in_fold_order():
    old = json.loads(
        json.dumps(
            {
                "fingerprint": "f",
                "package": "p",
                "config": "c",
                "args": None,
                "env": {"A": "1", "B": None},
                "upstream": {"lib#build": "x"},
                "files": {"src/a.js": "1", "src/gone.js": "1"},
            }
        )
    )
    new = dict(
        old,
        package="p2",
        args="3f2a",
        env={"A": "2", "B": None},
        upstream={"lib#build": "y"},
        files={"src/a.js": "9", "src/new.js": "1"},
    )
    assert differences(old, new) == [
        ("package", "package.json"),
        ("forward", "the arguments after `--`"),
        ("env", "A"),
        ("upstream", "lib#build"),
        ("file", "src/new.js (added)"),
        ("file", "src/gone.js (removed)"),
        ("file", "src/a.js"),
    ]


@pytest.mark.feature("OBS-06")
def test_up_to_date_hits_seed_only_an_empty_history():
    d = db()
    assert record_keys(d, [], settled=[("k1", rec())]) == 1  # the first run that keeps a history
    assert record_keys(d, [], settled=[("k9", rec(files=(("src/a.js", "9"),)))]) == 0  # never after
    assert [key for key, _at, _r in last_two(d, "a#build")] == ["k1"]
