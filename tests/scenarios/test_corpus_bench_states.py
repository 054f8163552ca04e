"""bench/corpus.py's states of a copy, on a real git repository: the cold step puts tracked files
back as committed (trpc's build rewrites each package's package.json and turbo.json), the restore
step never deletes a tracked file a declared output matches (a deleted package.json takes the
package out of the workspace), and the matrix can tell an edit that reached no package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from corpus import changed_paths, delete_outputs, owner_package, reset_tracked  # noqa: E402


def git(ws: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=ws, check=True, capture_output=True, text=True).stdout


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "packages" / "server" / "src").mkdir(parents=True)
    (ws / ".gitignore").write_text("node_modules\ndist\n")
    (ws / "package.json").write_text('{"name": "root", "workspaces": ["packages/*"]}\n')
    (ws / "packages" / "server" / "package.json").write_text('{"name": "@x/server"}\n')
    (ws / "packages" / "server" / "src" / "index.ts").write_text("export const a = 1;\n")
    git(ws.parent, "init", "-q", str(ws))
    git(ws, "add", "-A")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "pinned")
    return ws


def test_a_cold_reset_puts_tracked_files_back_and_keeps_the_install(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    manifest = ws / "packages" / "server" / "package.json"
    manifest.write_text('{"name": "@x/server", "exports": {}}\n')  # the build's rewrite
    (ws / "packages" / "server" / "src" / "left.ts").write_text("x\n")  # an interrupted edit
    (ws / "node_modules" / "dep").mkdir(parents=True)
    (ws / "node_modules" / "dep" / "index.js").write_text("1\n")
    (ws / ".vx").mkdir()
    (ws / ".vx" / "last-summary.json").write_text("{}\n")  # a tool's cache, cold's own business
    (ws / "packages" / "server" / "dist").mkdir()
    (ws / "packages" / "server" / "dist" / "index.js").write_text("1\n")

    done = reset_tracked(ws)

    assert done == {
        "restored": ["packages/server/package.json"],
        "removed": ["packages/server/src/left.ts"],
    }
    assert manifest.read_text() == '{"name": "@x/server"}\n'
    assert not (ws / "packages" / "server" / "src" / "left.ts").exists()
    assert (ws / "node_modules" / "dep" / "index.js").exists()
    assert (ws / ".vx" / "last-summary.json").exists()
    assert (ws / "packages" / "server" / "dist" / "index.js").exists()
    assert reset_tracked(ws) == {"restored": [], "removed": []}


def test_a_restore_keeps_a_tracked_file_its_outputs_name(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    (ws / "packages" / "server" / "dist").mkdir()
    (ws / "packages" / "server" / "dist" / "index.js").write_text("1\n")

    gone, kept = delete_outputs(ws, {"packages/server": ["package.json", "dist/**"]})

    assert (gone, kept) == (1, ["packages/server/package.json"])
    assert (ws / "packages" / "server" / "package.json").exists()
    assert not (ws / "packages" / "server" / "dist" / "index.js").exists()


def test_the_matrix_names_the_package_an_edit_reaches_and_sees_it_applied(tmp_path: Path) -> None:
    ws = workspace(tmp_path)
    rel = "packages/server/src/index.ts"
    assert owner_package(ws, rel) == "@x/server"
    assert owner_package(ws, "tsconfig.json") is None
    assert changed_paths(ws, rel) == []
    (ws / rel).write_text("export const a = 2;\n")
    assert changed_paths(ws, rel) == [f" M {rel}"]


def test_a_row_timed_on_some_tasks_names_the_task_of_each_ratio() -> None:
    """suspensive's time phase was stopped after `build` of four tasks: a bare "0.83" under a
    tasks column of four reads as the first of four or as all of them; the cell names it."""
    from corpus import CORPUS, summary_row

    repo = next(r for r in CORPUS if r.slug == "toss/suspensive")
    sample = {
        "cold": [[2.0, 1.0]],
        "warm": [[1.0, 1.0]],
        "restore": [[1.0, 1.0]],
        "edit": [[1.0, 1.0]],
    }
    timed = {"samples": {"vx": sample, "turbo": sample}}
    state = {"install": {"turbo": "2.9.12"}, "time": {"build": timed}}

    cells = summary_row(repo, state).split(" | ")
    assert cells[4:8] == ["build 1.0", "build 1.0", "build 1.0", "build 1.0"]

    every = {t: timed for t in repo.tasks}
    cells = summary_row(repo, {"install": {"turbo": "2.9.12"}, "time": every}).split(" | ")
    assert cells[4] == "1.0, 1.0, 1.0, 1.0"  # every task timed: in the tasks column's order
