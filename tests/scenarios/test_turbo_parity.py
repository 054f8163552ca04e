"""turbo.json parity of input files (TL-05, KEY-18): on every repository of a small corpus, the
files vx hashes for each task are the files the real turbo (2.11.11, pinned) hashes — the `inputs`
map of `turbo run --dry=json` against the `inputs` of `vx run --dry=json`, normalised as
bench/turbo_parity.py's `input_differences` says (package.json, turbo.json, globalDependencies and
a task's own outputs aside)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.corpora import TURBO_CORPUS, generated, lay_out, leave_work_around, tool_env
from support.turbo import QUIET, turbo_binary

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "bench"))

from turbo_parity import input_differences  # noqa: E402


@pytest.fixture(scope="module")
def turbo_bin() -> str:
    return turbo_binary()


def dry(repo, turbo_bin: str, tasks: list[str]) -> tuple[dict, dict]:
    t = subprocess.run(
        [turbo_bin, "run", *tasks, "--dry=json"],
        cwd=repo.root,
        env=tool_env("TURBO_", QUIET),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert t.returncode == 0, t.stderr
    v = repo.vx("run", *tasks, "--dry=json")
    assert v.code == 0, v.err
    return json.loads(t.stdout), json.loads(v.out)


def compared(turbo_doc: dict, vx_doc: dict) -> int:
    """How many cached tasks both tools planned: a parity over nothing proves nothing."""
    ours = {t["id"] for t in vx_doc["tasks"] if t["inputs"] is not None}
    return len(ours & {t["taskId"] for t in turbo_doc["tasks"]})


@pytest.mark.feature("TL-05", "KEY-18")
@pytest.mark.parametrize("shape", TURBO_CORPUS, ids=[p.stem for p in TURBO_CORPUS])
def test_each_task_hashes_the_files_turbo_hashes(repo, turbo_bin, shape):
    spec = json.loads(shape.read_text())
    lay_out(repo, spec)
    turbo_doc, vx_doc = dry(repo, turbo_bin, spec["tasks"])
    assert compared(turbo_doc, vx_doc) >= len(spec["tasks"])
    assert input_differences(turbo_doc, vx_doc) == {}


@pytest.mark.feature("TL-05", "KEY-18")
def test_the_turbo_example_hashes_what_turbo_hashes(repo, turbo_bin):
    shutil.copytree(
        REPO / "examples" / "turbo",
        repo.root,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("node_modules", ".vx", ".turbo", "dist"),
    )
    manifest = json.loads((repo.root / "package.json").read_text())
    manifest.setdefault("packageManager", "npm@11.19.1")  # turbo 2 refuses a workspace without one
    (repo.root / "package.json").write_text(json.dumps(manifest))
    repo.commit()
    (repo.root / "packages/core/dist").mkdir()
    (repo.root / "packages/core/dist/store.js").write_text("built\n")  # ignored, an output
    turbo_doc, vx_doc = dry(repo, turbo_bin, ["build", "test", "lint"])
    assert compared(turbo_doc, vx_doc) >= 6
    assert input_differences(turbo_doc, vx_doc) == {}


@pytest.mark.feature("TL-05", "KEY-18")
def test_a_generated_monorepo_hashes_what_turbo_hashes(tmp_path, turbo_bin):
    root = tmp_path / "gen"
    repo = generated(root, "turbo")
    leave_work_around(root)
    turbo_doc, vx_doc = dry(repo, turbo_bin, ["build", "test", "lint"])
    assert compared(turbo_doc, vx_doc) >= 20
    assert input_differences(turbo_doc, vx_doc) == {}
