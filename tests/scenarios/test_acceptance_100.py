"""Issue acceptance on a generated 100-package workspace (bench/gen_monorepo.py --tools vx):
cold run in dependency order; warm run all up to date with zero source files opened (strace);
deleted dist/ restored byte-identical; an edit to the most depended-on package re-runs exactly it
and its dependants."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.schemas import validate
from support.workspace import SRC, Repo

GEN = Path(__file__).resolve().parents[2] / "bench" / "gen_monorepo.py"
N = 100


@pytest.fixture(scope="module")
def mono(tmp_path_factory):
    root = tmp_path_factory.mktemp("mono") / "ws"
    subprocess.run(
        [sys.executable, str(GEN), str(root), "--packages", str(N), "-f", "10", "--tools", "vx"],
        check=True,
        capture_output=True,
    )
    repo = Repo(root)
    # git trusts its stat cache only for files older than the index file (second granularity):
    # files written in the same second as a commit are "racily clean" and git re-reads them until
    # a later `git status` rewrites the index. Real checkouts are older than a second; so is this one.
    time.sleep(1.1)
    cold = repo.vx("run", "build", timeout=600)
    return repo, cold


def dependants_of(root: Path, base: str) -> set[str]:
    """Packages that transitively depend on `base`, from the package.json files themselves."""
    deps = {}
    for pj in (root / "packages").glob("*/package.json"):
        data = json.loads(pj.read_text())
        deps[data["name"]] = set(data.get("dependencies", {}))
    out, frontier = set(), {base}
    while frontier:
        frontier = {name for name, ds in deps.items() if ds & frontier and name not in out}
        out |= frontier
    return out


def test_cold_run_builds_every_package_in_dependency_order(mono):
    repo, cold = mono
    assert cold.code == 0, cold.err[-2000:]
    assert len(cold.summary["tasks"]) == N
    assert all(t["status"] == "success" and t["cache"] == "miss" for t in cold.summary["tasks"])
    # build.js fails when a dependency's dist is missing, so success proves the order.
    assert len(list(repo.root.glob("packages/*/dist/index.js"))) == N


def test_warm_run_is_up_to_date_and_opens_no_source_file(mono):
    repo, _ = mono
    if not shutil.which("strace"):
        pytest.skip("strace is installed by dev/test")
    trace = repo.root.parent / "trace.txt"
    summary = repo.root / ".vx" / "warm.json"
    env = {
        **{
            k: v for k, v in os.environ.items() if not k.startswith("VX_") or k == "VX_SHARED_STORE"
        },
        "PYTHONPATH": SRC,
        "NO_COLOR": "1",
    }
    subprocess.run(
        [
            "strace",
            "-f",
            "-qq",
            "-e",
            "trace=openat,open",
            "-o",
            str(trace),
            sys.executable,
            "-m",
            "vx",
            "run",
            "build",
            f"--summarize={summary}",
        ],
        cwd=repo.root,
        env=env,
        check=True,
        capture_output=True,
    )
    validate(json.loads(summary.read_text()), "summary.json")
    tasks = json.loads(summary.read_text())["tasks"]
    assert len(tasks) == N and all(t["cache"] == "up-to-date" for t in tasks)
    opened = [
        l
        for l in trace.read_text().splitlines()
        if re.search(r'"[^"]*packages/pkg-\d+/src/[^"]*"', l) and "O_DIRECTORY" not in l
    ]
    assert opened == [], opened[:5]


def test_deleted_outputs_restore_byte_identical(mono):
    repo, _ = mono
    before = {p: p.read_bytes() for p in repo.root.glob("packages/*/dist/index.js")}
    for d in repo.root.glob("packages/*/dist"):
        shutil.rmtree(d)
    res = repo.vx("run", "build", timeout=300)
    assert res.code == 0
    assert len(res.summary["tasks"]) == N
    assert all(t["cache"] == "local" for t in res.summary["tasks"])
    assert {p: p.read_bytes() for p in repo.root.glob("packages/*/dist/index.js")} == before


def test_editing_the_core_package_reruns_exactly_it_and_its_dependants(mono):
    repo, _ = mono
    src = repo.root / "packages/pkg-0000/src/mod-00.js"
    src.write_text(src.read_text() + "\n// edited\n")
    expected = {f"{name}#build" for name in dependants_of(repo.root, "@bench/pkg-0000")} | {
        "@bench/pkg-0000#build"
    }
    res = repo.vx("run", "build", timeout=600)
    assert res.code == 0
    reran = {t["id"] for t in res.summary["tasks"] if t["cache"] == "miss"}
    assert reran == expected and len(res.summary["tasks"]) == N
    assert all(t["cache"] == "up-to-date" for t in res.summary["tasks"] if t["id"] not in expected)
