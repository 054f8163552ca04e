"""Files a target without `outputs` writes into another target's outputs come back as under Nx.

nx-console's `generate-ui-v2`: `_build` (outputs `dist/apps/generate-ui-v2`) <- `extract-dependencies`
(cached, no outputs: copies codicons into that dist) <- `build` (the same outputs). Nx archives
everything under `build`'s outputs when it ends, so every restore gives the codicons back. vx
saved only what `build` itself wrote: `_build`'s restore (a wipe first) took the codicons, and
`build`'s restore did not bring them back."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from support.npm_packages import installed_or_skip
from support.nx import nx_cli


def write(path: str, text: str) -> str:
    return (
        f"node -e \"const f=require('fs');f.mkdirSync(require('path').dirname('{path}'),"
        f"{{recursive:true}});f.writeFileSync('{path}','{text}')\""
    )


def workspace(copy_cache: bool) -> dict[str, object]:
    return {
        "package.json": {"name": "root", "private": True},
        "nx.json": {},
        ".gitignore": "node_modules\ndist\n.nx\n.vx\n",
        "apps/app/src/main.js": "main;\n",
        "apps/app/project.json": {
            "name": "app",
            "targets": {
                "_build": {
                    "command": write("dist/app/main.js", "main"),
                    "outputs": ["{workspaceRoot}/dist/app"],
                    "cache": True,
                },
                "copy": {
                    "command": write("dist/app/vendor/extra.txt", "extra"),
                    "dependsOn": ["_build"],
                    "cache": copy_cache,
                },
                "build": {
                    "command": write("dist/app/out.css", "css"),
                    "outputs": ["{workspaceRoot}/dist/app"],
                    "dependsOn": ["copy"],
                    "cache": True,
                },
            },
        },
    }


def dist(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in (root / "dist").rglob("*") if p.is_file())


WANTED = ["dist/app/main.js", "dist/app/out.css", "dist/app/vendor/extra.txt"]


@pytest.mark.parametrize("copy_cache", [True, False], ids=["copy-cached", "copy-uncached"])
def test_a_restore_keeps_what_an_upstream_without_outputs_wrote_as_nx_does(
    repo, tmp_path, copy_cache
):
    ws = repo.write(workspace(copy_cache)).commit()
    nx_root = tmp_path / "nx"
    shutil.copytree(ws.root, nx_root)
    (nx_root / "node_modules").mkdir()
    (nx_root / "node_modules" / "nx").symlink_to(installed_or_skip("nx"))

    seen: dict[str, list[list[str]]] = {"nx": [], "vx": []}
    for step in ("cold", "warm", "deleted", "warm again"):
        if step == "deleted":
            shutil.rmtree(nx_root / "dist")
            shutil.rmtree(ws.root / "dist")
        nx_cli(nx_root, "run", "app:build", cache=True)
        seen["nx"].append(dist(nx_root))
        result = ws.vx("run", "app:build")
        assert result.code == 0, result.err + result.out
        seen["vx"].append(dist(ws.root))
    assert seen["nx"] == [WANTED] * 4  # the oracle: each state holds the copied file
    assert seen["vx"] == seen["nx"]


def test_what_an_uncached_upstream_writes_is_never_restored_stale(repo):
    """An uncached `copy` runs every time and may write what no key folds (here: an env var
    nothing keys: a file outside the workspace): `build`'s hit must leave its fresh file, not
    restore last run's."""
    files = workspace(copy_cache=False)
    project = files["apps/app/project.json"]
    assert isinstance(project, dict)
    project["targets"]["copy"]["command"] = (
        "node -e \"const f=require('fs');f.mkdirSync('dist/app/vendor',{recursive:true});"
        "f.writeFileSync('dist/app/vendor/extra.txt',f.readFileSync('../stamp.txt'))\""
    )
    ws = repo.write(files).commit()
    extra = ws.root / "dist/app/vendor/extra.txt"
    for stamp in ("one", "two"):
        (ws.root.parent / "stamp.txt").write_text(stamp)
        result = ws.vx("run", "app:build")
        assert result.code == 0, result.err + result.out
        assert extra.read_text() == stamp
    assert result.statuses()["app#build"][1] != "miss"  # the second `build` was a hit


def test_a_task_no_edge_orders_keeps_the_shared_tree_out_of_an_entry(repo):
    """Two Nx targets writing one dist with no edge between them: `build` does not save the
    other's files (they are no function of its key, and may be half written while it runs). One
    task at a time, `other` ends before `build` starts, so only the whole-tree save could take
    its file."""
    files = workspace(copy_cache=True)
    project = files["apps/app/project.json"]
    assert isinstance(project, dict)
    targets = project["targets"]
    targets["other"] = {
        "command": write("dist/app/other.txt", "other"),
        "outputs": ["{workspaceRoot}/dist/app/other.txt"],
        "dependsOn": ["_build"],
        "cache": True,
    }
    targets["all"] = {"command": "echo done", "dependsOn": ["build", "other"]}
    ws = repo.write(files).commit()
    result = ws.vx("run", "app:all", "--concurrency=1")
    assert result.code == 0, result.err + result.out
    shutil.rmtree(ws.root / "dist")
    result = ws.vx("run", "app:build")  # `other` is not run: its file must not come back
    assert result.code == 0, result.err + result.out
    assert "dist/app/other.txt" not in dist(ws.root)


def test_a_warm_run_of_the_additive_pair_replays_as_any_warm_run_does(repo):
    """nx-console's `generate-ui-v2` chain, warm: nothing changed, yet every `vx run` restored
    `_build` (its dist holds `build`'s and `copy`'s files) and then `build` over it, and no warm
    run ever replayed its receipt (a restoring run's receipt holds no identities of the
    directories it just made). Nx takes both from its cache each time too, but vx's warm target
    is its replay. Failed before the fix ([False, False, False])."""
    ws = repo.write(workspace(copy_cache=True)).commit()

    def replayed() -> bool:
        time.sleep(0.06)  # past the racy window of what the last run wrote, as settle() does
        result = ws.vx("run", "app:build", summary=False, env={"VX_TIMING": "1"})
        assert result.code == 0, result.err + result.out
        assert dist(ws.root) == WANTED
        return "receipt check" in result.err

    assert [replayed() for _ in range(5)][2:] == [True] * 3  # cold, the receipt's run, replays
    shutil.rmtree(ws.root / "dist")
    replayed()  # all of it back: `build`'s whole tree (asserted in replayed)
    (ws.root / "dist/app/main.js").write_text("edited")  # `build`'s stamps no longer hold
    replayed()
    assert (ws.root / "dist/app/main.js").read_text() == "main"
    (ws.root / "dist/app/stray.txt").write_text("stray")  # a file neither entry holds
    result = ws.vx("run", "app:build")
    assert result.code == 0, result.err
    assert dist(ws.root) == WANTED  # `_build`'s wipe took it, as before


def test_a_file_of_the_upstream_entry_outside_the_covering_tree_is_never_left_lost(repo):
    """`_build` also writes `dist/types`, which `build`'s whole-tree save does not hold. Deleting
    that file leaves what is on disk of `_build`'s outputs inside `build`'s tree, but `_build`'s
    entry still holds it: the hit is not current through `build`, the file is restored, and a
    replay after it finds it there."""
    files = workspace(copy_cache=True)
    targets = files["apps/app/project.json"]["targets"]  # type: ignore[index]
    targets["_build"]["command"] += " && " + write("dist/types/index.d.ts", "types")
    targets["_build"]["outputs"].append("{workspaceRoot}/dist/types")
    ws = repo.write(files).commit()
    wanted = sorted([*WANTED, "dist/types/index.d.ts"])
    for _ in range(3):
        time.sleep(0.06)  # past the racy window of what the last run wrote, as settle() does
        assert ws.vx("run", "app:build").code == 0
        assert dist(ws.root) == wanted
    (ws.root / "dist/types/index.d.ts").unlink()
    result = ws.vx("run", "app:build")
    assert result.code == 0, result.err
    assert dist(ws.root) == wanted
    time.sleep(0.06)
    assert ws.vx("run", "app:build").code == 0
    assert dist(ws.root) == wanted


def run_and_read(ws) -> tuple[bool, dict[str, bytes]]:
    """One `vx run app:build`: whether it replayed its receipt, and every file of `dist`."""
    time.sleep(0.06)  # past the racy window of what the last run wrote, as settle() does
    result = ws.vx("run", "app:build", summary=False, env={"VX_TIMING": "1"})
    assert result.code == 0, result.err + result.out
    return "receipt check" in result.err, {p: (ws.root / p).read_bytes() for p in dist(ws.root)}


def test_a_deleted_output_tree_of_the_additive_pair_is_restored_by_the_replay(repo):
    """nx-console's restore round (bench/nx_side.py deletes `dist/apps/generate-ui-v2`): the
    receipt kept the covered `_build` with no expected files (its files are vouched for by
    `build`'s whole tree), so the replay refused `_build`'s artifact and every restore planned
    in full (#28's restore rows). Both absent, `build`'s entry holds every file of `_build`'s
    (`taskcache.covering`): the replay restores the tree from it, byte for byte the cold build.
    Failed before the fix (no `receipt check` in any restore)."""
    ws = repo.write(workspace(copy_cache=True)).commit()
    cold = run_and_read(ws)[1]
    assert sorted(cold) == WANTED
    assert [run_and_read(ws)[0] for _ in range(4)][1:] == [True] * 3
    for _ in range(3):
        shutil.rmtree(ws.root / "dist/app")
        assert run_and_read(ws) == (True, cold)
        assert run_and_read(ws)[1] == cold  # plans: the restore's directories are too new
        assert run_and_read(ws) == (True, cold)
    # not absent but changed: a stale file where the tree was, or a part of it gone
    shutil.rmtree(ws.root / "dist/app")
    (ws.root / "dist/app").mkdir()
    (ws.root / "dist/app/main.js").write_text("stale")
    assert run_and_read(ws) == (False, cold)
    assert [run_and_read(ws)[1] == cold for _ in range(2)] == [True, True]
    shutil.rmtree(ws.root / "dist/app/vendor")  # what `copy` wrote, held by `build`'s entry
    assert run_and_read(ws) == (False, cold)


def test_a_replay_never_restores_the_upstream_through_a_tree_missing_its_files(repo):
    """`_build` also writes `dist/types`, outside `build`'s whole tree: `_build` is not covered,
    so its receipt keeps its own files. Whatever is deleted, the replay restores it or the
    pipeline does: never a file lost, never one other than the cold build's."""
    files = workspace(copy_cache=True)
    targets = files["apps/app/project.json"]["targets"]  # type: ignore[index]
    targets["_build"]["command"] += " && " + write("dist/types/index.d.ts", "types")
    targets["_build"]["outputs"].append("{workspaceRoot}/dist/types")
    ws = repo.write(files).commit()
    cold = run_and_read(ws)[1]
    assert sorted(cold) == sorted([*WANTED, "dist/types/index.d.ts"])
    for gone in ("dist/types", "dist/app", "dist/app/main.js", "dist/types dist/app"):
        for _ in range(3):  # warm: a receipt, if any, and its replay
            assert run_and_read(ws)[1] == cold
        for path in gone.split():
            target = ws.root / path
            shutil.rmtree(target) if target.is_dir() else target.unlink()
        assert run_and_read(ws)[1] == cold, gone
        assert run_and_read(ws)[1] == cold, gone


def test_two_artifacts_restoring_one_path_leave_it_current_and_replaying(repo):
    """`_build`'s output is the one file `dist/app/main.js`, which `build`'s whole tree holds too:
    both are current, so the receipt keeps both, and a replay finding the tree deleted extracts
    both artifacts over one path (the second renames over the first; each artifact's stamps are
    taken by whoever restored it, right after it). Nothing may come back stale or be restored
    again: the next run restores nothing (`_build` current through `build`) and replays after."""
    files = workspace(copy_cache=True)
    files["apps/app/project.json"]["targets"]["_build"]["outputs"] = [  # type: ignore[index]
        "{workspaceRoot}/dist/app/main.js"
    ]
    ws = repo.write(files).commit()

    def inodes() -> dict[str, int]:
        return {p: (ws.root / p).stat().st_ino for p in dist(ws.root)}

    cold = run_and_read(ws)[1]
    assert sorted(cold) == WANTED
    assert [run_and_read(ws)[0] for _ in range(3)][1:] == [True, True]
    for _ in range(2):
        shutil.rmtree(ws.root / "dist/app")
        assert run_and_read(ws) == (True, cold)
        restored = inodes()
        assert run_and_read(ws)[1] == cold  # plans: the restore's directories are too new
        assert inodes() == restored  # and restores nothing: each stamp holds
        assert run_and_read(ws) == (True, cold)
