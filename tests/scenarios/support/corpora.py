"""The parity workspaces: the corpora, shapes of public repositories (`turbo_corpus/`,
`nx_corpus/`), each a JSON spec laid out in a real git repo; a generated monorepo; and the
environment the real tool runs them in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.workspace import SRC, Repo

SCENARIOS = Path(__file__).resolve().parents[1]
GEN_MONOREPO = SCENARIOS.parents[1] / "bench" / "gen_monorepo.py"
TURBO_CORPUS = sorted((SCENARIOS / "turbo_corpus").glob("*.json"))
NX_CORPUS = sorted((SCENARIOS / "nx_corpus").glob("*.json"))


def lay_out(repo, spec: dict) -> None:
    """Commit the spec's `files` (its `force_add` tracked though ignored), then delete its
    `delete` and write its `untracked` files over the commit."""
    repo.write(spec["files"])
    if spec.get("force_add"):  # tracked though ignored
        repo.git("init", "-q", "-b", "main")
        repo.git("add", "-f", *spec["force_add"])
    repo.commit()
    for path in spec.get("delete", ()):
        (repo.root / path).unlink()
    repo.write(spec.get("untracked", {}))


def tool_env(own: str, settings: dict[str, str]) -> dict[str, str]:
    """The environment the real turbo or Nx runs with: none of the caller's vx, CI or own
    (`own`, a prefix such as `NX_`) settings, the suite's shared-store switch kept, then
    `settings`. The suite's Nx native-binary directory is kept too (tests/conftest.py)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VX_", "CI", own))
        or k in ("VX_SHARED_STORE", "NX_NATIVE_FILE_CACHE_DIRECTORY")
    }
    return {**env, **settings}


def generated(root: Path, tool: str, packages: int = 8) -> Repo:
    """A monorepo of `packages` packages, 3 files each, that bench/gen_monorepo.py makes for
    `tool`."""
    subprocess.run(
        [sys.executable, str(GEN_MONOREPO), str(root), "-n", str(packages), "-f", "3", "--tools",
         tool, "--no-devdeps"],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": SRC},
    )  # fmt: skip
    return Repo(root)


def leave_work_around(root: Path) -> None:
    """Built outputs (ignored) and an untracked source in two of a generated monorepo's packages."""
    for name in ("pkg-0001", "pkg-0005"):
        (root / "packages" / name / "dist").mkdir()
        (root / "packages" / name / "dist" / "index.js").write_text("built\n")
        (root / "packages" / name / "src" / "wip.js").write_text("wip\n")
