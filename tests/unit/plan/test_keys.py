"""Key fold (KEY-02, KEY-07, KEY-10) and the golden pin (house rule 4)."""

import json
from pathlib import Path

import pytest

from vx import CACHE_VERSION
from vx.model import HashRecord, TaskId
from vx.plan.keys import group_key, select_upstream, task_key

GOLDEN = Path(__file__).parents[2] / "golden" / "keys.json"


def record(**over):
    base = dict(
        task_id="app#build",
        fingerprint="f" * 16,
        package_json="100644:abc",
        config='{"exec":{}}',
        forward_args=(),
        env=(("API_URL", "https://x"),),
        upstream=(("lib#build", "0123456789abcdef"),),
        files=(("packages/app/src/a.js", "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"),),
    )
    base.update(over)
    return HashRecord(**base)


@pytest.mark.feature("KEY-03")
def test_golden_keys_are_pinned():
    """Changing the fold must be a deliberate CACHE_VERSION bump: update tests/golden/keys.json with it."""
    golden = json.loads(GOLDEN.read_text())
    assert golden["cacheVersion"] == CACHE_VERSION
    assert task_key(record()) == golden["task"]
    assert group_key([("a#x", "1"), ("b#y", "2")]) == golden["group"]


@pytest.mark.feature("KEY-02")
def test_key_is_16_hex_and_deterministic():
    k = task_key(record())
    assert len(k) == 16 and int(k, 16) >= 0
    assert k == task_key(record())


@pytest.mark.feature("KEY-02")
def test_every_component_moves_the_key():
    base = task_key(record())
    variants = [
        record(task_id="app#test"),
        record(fingerprint="0" * 16),
        record(package_json=""),
        record(config="{}"),
        record(forward_args=("--x",)),
        record(env=(("API_URL", "https://y"),)),
        record(upstream=()),
        record(files=()),
        record(
            files=(("packages/app/src/a.js", "100755:e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"),)
        ),
    ]
    keys = {task_key(v) for v in variants}
    assert base not in keys and len(keys) == len(variants)


@pytest.mark.feature("KEY-07")
def test_unset_empty_and_unlisted_env_differ():
    unset = task_key(record(env=(("A", None),)))
    empty = task_key(record(env=(("A", ""),)))
    unlisted = task_key(record(env=()))
    assert len({unset, empty, unlisted}) == 3


@pytest.mark.feature("KEY-02")
def test_boundaries_are_unambiguous():
    a = task_key(record(forward_args=("a b",)))
    b = task_key(record(forward_args=("a", "b")))
    assert a != b
    f1 = task_key(record(files=(("x", "1"), ("y", "2"))))
    f2 = task_key(record(files=(("x\x001", "y"),)))
    assert f1 != f2


@pytest.mark.feature("GR-03")
def test_group_key_is_order_independent():
    assert group_key([("a#x", "1"), ("b#y", "2")]) == group_key([("b#y", "2"), ("a#x", "1")])


@pytest.mark.feature("KEY-10")
def test_inputs_tasks_filter_last_match_wins():
    owner = TaskId("app", "test")
    deps = [TaskId("app", "build"), TaskId("lib", "build"), TaskId("lib", "gen")]
    assert select_upstream(owner, deps, None) == deps
    assert select_upstream(owner, deps, []) == []
    assert select_upstream(owner, deps, ["*"]) == [TaskId("app", "build")]
    assert select_upstream(owner, deps, ["^*", "!^gen"]) == [
        TaskId("lib", "build"),
    ]
    assert select_upstream(owner, deps, ["lib#*", "!lib#build"]) == [TaskId("lib", "gen")]
