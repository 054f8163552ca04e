"""Nx parity of the task graph (TL-05): on every workspace of a small corpus, `vx run-many` plans the
tasks the real Nx (21.6.4, pinned) plans — `nx run-many -t … --graph=FILE` — with the same
dependencies; each project's targets resolve as `nx show project NAME --json` prints them (`vx show
project NAME --json`), each task's outputs and caching are what Nx resolves; and
each cached task hashes the files Nx's hash plan names (nx_hash_plan.js), but for the two Nx
folds into every hash (the root .gitignore and nx.json: vx keys what they mean, through the file
set and the mapped declaration).

Nx runs offline here: no daemon, no cloud, no terminal UI. Sources are `.txt` files, so Nx's
import analysis adds no edge that package.json and `implicitDependencies` do not declare."""

from __future__ import annotations

import json
import posixpath
import subprocess
from pathlib import Path

import pytest
from support.corpora import NX_CORPUS, generated, leave_work_around, tool_env
from support.npm_packages import installed_or_skip
from support.nx import OFFLINE

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def nx_package() -> Path:
    return installed_or_skip("nx")


def offline_node(repo, script: Path, *args: str) -> subprocess.CompletedProcess:
    """`node SCRIPT ARGS` in `repo`, as Nx runs here: offline, no daemon, no cloud."""
    return subprocess.run(
        ["node", str(script), *args],
        cwd=repo.root,
        env=tool_env("NX_", OFFLINE),
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


def nx(repo, nx_package: Path, *args: str) -> str:
    proc = offline_node(repo, nx_package / "bin" / "nx.js", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def workspace(repo, nx_package: Path, spec: dict):
    repo.write(spec["files"])
    (repo.root / "node_modules").mkdir(exist_ok=True)
    (repo.root / "node_modules" / "nx").symlink_to(nx_package)  # Nx wants itself in the workspace
    return repo.commit()


def nx_graph(repo, nx_package: Path, tasks: list[str], out: Path) -> dict[str, list[str]]:
    """Nx's task graph by vx's names: Nx names a target run in its `defaultConfiguration` with it
    (`store:build:production`), vx's `store#build` is that run."""
    nx(repo, nx_package, "run-many", "-t", *tasks, f"--graph={out}")
    doc = json.loads(out.read_text())
    plain = {}
    for tid, task in doc["tasks"]["tasks"].items():
        target = task["target"]
        plain[tid] = f"{target['project']}:{target['target']}"
        if target.get("configuration"):
            project = json.loads(
                nx(repo, nx_package, "show", "project", target["project"], "--json")
            )
            if (
                project["targets"][target["target"]].get("defaultConfiguration")
                != target["configuration"]
            ):
                plain[tid] += f":{target['configuration']}"
    graph = {
        plain[tid]: sorted(plain[d] for d in deps)
        for tid, deps in doc["tasks"]["dependencies"].items()
    }
    doc["tasks"]["tasks"] = {plain[tid]: task for tid, task in doc["tasks"]["tasks"].items()}
    doc["plain"] = plain
    return graph, doc


def vx_graph(repo, tasks: list[str]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """vx's plan by Nx's names, looking through the implicit `build` groups vx gives a project
    without one (WS-19): Nx's `^build` passes over such a project to its dependencies' builds."""
    result = repo.vx("run-many", "-t", *tasks, "--dry=json")
    assert result.code == 0, result.err
    rows = {t["id"]: t for t in json.loads(result.out)["tasks"]}

    def through(tid: str) -> list[str]:
        row = rows[tid]
        return [
            d for dep in row["deps"] for d in (through(dep) if rows[dep].get("implicit") else [dep])
        ]

    graph = {
        tid.replace("#", ":"): sorted({d.replace("#", ":") for d in through(tid)})
        for tid, row in rows.items()
        if not row.get("implicit")
    }
    return graph, {tid.replace("#", ":"): row["dir"] for tid, row in rows.items()}


def nx_resolved(repo, nx_package: Path, doc: dict) -> dict[str, tuple[bool, list[str]]]:
    """Per task: whether Nx caches it and its outputs, workspace-relative, as `nx show project` gives
    them. Nx's fallback output `{projectRoot}/public` is left out: vx does not wipe an app's
    static sources (docs/config.md)."""
    out = {}
    for tid, task in doc["tasks"]["tasks"].items():
        project = json.loads(
            nx(repo, nx_package, "show", "project", task["target"]["project"], "--json")
        )
        target = project["targets"][task["target"]["target"]]
        public = posixpath.join(project["root"], "public")
        out[tid] = (bool(target.get("cache")), sorted(o for o in task["outputs"] if o != public))
    return out


NX_EVERYWHERE = {".gitignore", "nx.json"}
TARGET_FIELDS = (
    "executor",
    "options",
    "configurations",
    "defaultConfiguration",
    "dependsOn",
    "inputs",
    "outputs",
    "cache",
    "continuous",
    "parallelism",
)


def shown(doc: dict) -> dict:
    """A project as `show project NAME --json` prints it, in the fields vx resolves (not Nx's metadata)."""
    return {
        "root": doc["root"],
        "name": doc["name"],
        "tags": sorted(doc.get("tags", [])),
        "implicitDependencies": doc.get("implicitDependencies", []),
        "targets": {
            t: {k: body[k] for k in TARGET_FIELDS if k in body}
            for t, body in doc["targets"].items()
        },
    }


def same_projects(repo, nx_package: Path, names) -> None:
    """`vx show project NAME --json` resolves each target as `nx show project NAME --json` does."""
    for name in sorted(names):
        ours = repo.vx("show", "project", name, "--json")
        assert ours.code == 0, ours.err
        theirs = json.loads(nx(repo, nx_package, "show", "project", name, "--json"))
        assert shown(json.loads(ours.out)) == shown(theirs)


def nx_files(repo, tasks: list[str], plain: dict[str, str]) -> dict[str, list[str]]:
    proc = offline_node(repo, HERE / "support" / "nx_hash_plan.js", *tasks)
    assert proc.returncode == 0, proc.stderr
    return {
        plain.get(tid, tid): sorted(
            e[5:] for e in plan if e.startswith("file:") and e[5:] not in NX_EVERYWHERE
        )
        for tid, plan in json.loads(proc.stdout).items()
    }


def vx_files(repo, tasks: list[str], cached) -> dict[str, list[str]]:
    """The files each task's key folds: its own inputs, and through the implicit groups a `^name`
    input depends on (`nx-inputs.name`, keyed on each dependency's files), theirs."""
    result = repo.vx("run-many", "-t", *tasks, "--dry=json")
    assert result.code == 0, result.err
    rows = {t["id"]: t for t in json.loads(result.out)["tasks"]}

    def files(tid: str) -> set[str]:
        row = rows[tid]
        return set(row["inputs"] or ()).union(
            *(files(d) for d in row["deps"] if rows[d].get("implicit"))
        )

    return {
        tid.replace("#", ":"): sorted(files(tid)) for tid in rows if tid.replace("#", ":") in cached
    }


def vx_resolved(repo, ids, dirs: dict[str, str]) -> dict[str, tuple[bool, list[str]]]:
    out = {}
    for tid in ids:
        project, _, task = tid.partition(":")
        shown = repo.vx("show", f"{project}#{task}", "--format", "json")
        assert shown.code == 0, shown.err
        cache = json.loads(shown.out)["tasks"][task].get("cache")
        if cache is None:
            out[tid] = (False, [])
            continue
        own = [posixpath.normpath(posixpath.join(dirs[tid], f)) for f in cache["outputs"]["files"]]
        out[tid] = (True, sorted(own + cache["outputs"].get("workspaceFiles", [])))
    return out


@pytest.mark.feature("TL-05")
@pytest.mark.parametrize("shape", NX_CORPUS, ids=[p.stem for p in NX_CORPUS])
def test_each_task_graph_is_the_one_nx_plans(repo, tmp_path, nx_package, shape):
    spec = json.loads(shape.read_text())
    workspace(repo, nx_package, spec)
    theirs, doc = nx_graph(repo, nx_package, spec["tasks"], tmp_path / "graph.json")
    ours, dirs = vx_graph(repo, spec["tasks"])
    assert len(theirs) >= len(spec["tasks"])  # a parity over nothing proves nothing
    assert ours == theirs
    cached = nx_resolved(repo, nx_package, doc)
    assert vx_resolved(repo, cached, dirs) == {
        tid: (c, o) if c else (False, []) for tid, (c, o) in cached.items()
    }
    same_projects(
        repo, nx_package, {t["target"]["project"] for t in doc["tasks"]["tasks"].values()}
    )
    keyed = {tid for tid, (c, _o) in cached.items() if c}
    assert keyed  # a parity over nothing proves nothing
    theirs_files = {
        tid: files
        for tid, files in nx_files(repo, spec["tasks"], doc["plain"]).items()
        if tid in keyed
    }
    assert vx_files(repo, spec["tasks"], keyed) == theirs_files


@pytest.mark.feature("TL-05")
def test_a_generated_nx_monorepo_plans_what_nx_plans(tmp_path, nx_package):
    root = tmp_path / "gen"
    repo = generated(root, "nx")
    (root / "node_modules").mkdir(exist_ok=True)
    if not (root / "node_modules" / "nx").exists():
        (root / "node_modules" / "nx").symlink_to(nx_package)
    repo.commit()
    leave_work_around(root)
    tasks = ["build", "test", "lint"]
    theirs, doc = nx_graph(repo, nx_package, tasks, tmp_path / "graph.json")
    ours, dirs = vx_graph(repo, tasks)
    assert len(theirs) >= 20
    assert ours == theirs
    keyed = set(theirs)
    assert vx_files(repo, tasks, keyed) == nx_files(repo, tasks, doc["plain"])


@pytest.mark.feature("TL-05")
def test_the_nx_example_plans_and_hashes_what_nx_does(repo, tmp_path, nx_package):
    import shutil

    shutil.copytree(
        HERE.parents[1] / "examples" / "nx",
        repo.root,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("node_modules", ".vx", ".nx", "dist"),
    )
    (repo.root / "node_modules").mkdir()
    (repo.root / "node_modules" / "nx").symlink_to(nx_package)
    repo.commit()
    tasks = ["build", "test", "lint"]
    theirs, doc = nx_graph(repo, nx_package, tasks, tmp_path / "graph.json")
    ours, dirs = vx_graph(repo, tasks)
    assert len(theirs) == 9
    assert ours == theirs
    cached = nx_resolved(repo, nx_package, doc)
    assert vx_resolved(repo, cached, dirs) == cached
    same_projects(
        repo, nx_package, {t["target"]["project"] for t in doc["tasks"]["tasks"].values()}
    )
    assert vx_files(repo, tasks, set(cached)) == nx_files(repo, tasks, doc["plain"])
