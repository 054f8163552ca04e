"""Plugins that hand vx hostile values or exits (docs/plugins.md): each is the run's failure in
one line naming the plugin, exit 2, before any task runs — never an internal error, and never a
run that ends as if it had passed."""

from __future__ import annotations

import pytest
from test_plugins import R, workspace

HOSTILE = {
    # a NaN weight orders nothing; an infinity or an int past any float neither
    "nan weight": (
        R + "{'schedule': lambda tasks, ctx: {'a#build': float('nan')}}",
        "its `schedule` hook gave a#build the weight nan",
    ),
    "infinite weight": (
        R + "{'schedule': lambda tasks, ctx: {'a#build': 10**400}}",
        "its `schedule` hook gave a#build the weight 1000",
    ),
    # sys.exit(0) in a key hook used to end `vx run` with exit 0 and nothing run
    "exit in a hook": (
        "import sys\n" + R + "{'key': lambda task, ctx: sys.exit(0)}",
        "failed in its `key` hook: SystemExit: 0",
    ),
    "exit as it loads": (
        "import sys\ndef plugin(o):\n    sys.exit(0)\n",
        "failed in its `plugin(options)` hook: SystemExit: 0",
    ),
    # a config hook's non-string key used to be an internal error in the config checks
    "a config key that is no string": (
        "def plugin(o):\n    return {'config': lambda ws, ctx: {**ws, 1: 2}}\n",
        "unknown key `1` in the workspace config",
    ),
    "a config that holds itself": (
        "def plugin(o):\n    def config(ws, ctx):\n        ws['rules'] = ws\n        return ws\n"
        "    return {'config': config}\n",
        "its `config` hook returned what is not JSON data",
    ),
    # a lone surrogate cannot be hashed into a key: it was an internal error
    "a key value that is no text": (
        R + "{'key': lambda task, ctx: {'abi': '\\udcff'}}",
        "its `key` hook returned {'abi': '\\udcff'} for a#build",
    ),
    # an exception that cannot say what it is was an internal error too
    "an exception whose message throws": (
        "class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\n"
        "def key(task, ctx):\n    raise E()\n" + R + "{'key': key}",
        "failed in its `key` hook: E",
    ),
}


@pytest.mark.feature("PL-03")
@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_plugin_fails_the_run_in_one_line(repo, case):
    """A plugin's hostile return or exit (issue: plugins — NaN weights, non-string keys, a
    config that is not JSON, a hook that exits) fails the run with one clear line, exit 2."""
    code, words = HOSTILE[case]
    workspace(repo, ["hostile"], {"hostile": code})
    res = repo.vx("run", "build", summary=False)
    assert res.code == 2, (res.code, res.err)
    errors = [line for line in res.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and words in errors[0] and "hostile" in res.err, res.err
    assert "internal error" not in res.err and "Traceback" not in res.err
    assert not (repo.root / "packages/a/dist").exists()  # nothing ran


LOUD = """
import os, sys

def plugin(options):
    def setup(ctx):
        print("PRINTED-IN-SETUP")
        os.system("echo FROM-A-CHILD")

    def sink(event):
        print("SINK", type(event).__name__)
        sys.stdout.flush()

    return {"setup": setup, "telemetry": lambda ctx: sink}
"""


@pytest.mark.feature("WS-22", "PL-03")
@pytest.mark.parametrize("words", [["--format", "json"], ["--dry=json"]])
def test_a_plugin_that_prints_leaves_the_json_on_stdout_whole(repo, words):
    """`vx run --format json` promises one JSON document on stdout; a plugin's print (setup, a
    telemetry sink) and a child it started used to write in front of it, so `jq` could not
    read it. They go to stderr; stdout is the document alone."""
    import json

    workspace(repo, ["loud"], {"loud": LOUD})
    res = repo.vx("run", "build", *words, summary=False)
    assert res.code == 0, res.err
    doc = json.loads(res.out)  # the whole of stdout, nothing before or after it
    assert [t["id"] for t in doc["tasks"]] == ["a#build"]
    assert "PRINTED-IN-SETUP" in res.err and "FROM-A-CHILD" in res.err
    if words == ["--format", "json"]:
        assert "SINK RunFinished" in res.err
