"""A restore writes only what the task owns, and a hostile or damaged artifact costs a miss, never the
run (the store's promises in docs/caching.md, "What vx promises")."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from support.store import plant_artifact
from support.workspace import build_task, npm_workspace, one_build


def plant(repo, key: str, members: dict[str, bytes]) -> None:
    """An artifact anyone with the team token could have uploaded, in place of `key`'s."""
    plant_artifact(repo.root / ".vx" / "cache", "cache.db", key, members)


def only_key(repo) -> str:
    [art] = (repo.root / ".vx" / "cache").glob("*.tar.zst")
    return art.name.split(".")[0]


WIDE = {
    "files": ["dist/**"],
    "workspaceFiles": ["**/pre-commit", "**/receipts/*", "**/left-pad/*.js", "**/index.js"],
}


def wide_workspace(repo, outputs=WIDE) -> None:
    """Output globs wide enough to match what the hostile artifacts plant (nothing they match
    exists when the task saves)."""
    task = build_task(deps=())
    task["cache"]["outputs"] = outputs
    repo.write(
        npm_workspace(
            {
                "app": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}},
                "other": {"files": {"src/main.js": "OTHER;"}},
            }
        )
    ).commit()


@pytest.mark.parametrize(
    "hostile",
    [
        ".git/hooks/pre-commit",
        ".vx/receipts/planted.js",
        "packages/app/node_modules/left-pad/index.js",
        "packages/other/src/index.js",
    ],
)
def test_a_restore_refuses_members_the_task_cannot_own(repo, hostile):
    """The output globs match these paths, but a restore never writes .git, .vx, an
    unnamed node_modules or another project's sources: the entry is a miss, with a warning
    naming the member, and the task runs."""
    wide_workspace(repo)
    assert repo.vx("run", "build", "--all").code == 0
    before = (repo.root / hostile).read_bytes() if (repo.root / hostile).exists() else None
    plant(
        repo,
        only_key(repo),
        {"packages/app/dist/out.js": b"A;", hostile: b"#!/bin/sh\necho pwned\n"},
    )
    (repo.root / "packages/app/dist/out.js").unlink()
    res = repo.vx("run", "build", "--all")
    assert res.code == 0, res.err
    assert res.task("app#build")["cache"] == "miss"
    warnings = [line for line in res.err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and hostile in warnings[0], res.err
    after = (repo.root / hostile).read_bytes() if (repo.root / hostile).exists() else None
    assert after == before
    assert (repo.root / "packages/app/dist/out.js").read_text() == "A;"


@pytest.mark.parametrize(
    "outputs, field",
    [
        ({"files": ["dist/**"], "workspaceFiles": [".git/**"]}, "cache.outputs.workspaceFiles[0]"),
        ({"files": ["dist/**", ".vx/**"]}, "cache.outputs.files[1]"),
        ({"files": ["src/**"]}, "cache.outputs.files[0]"),
        ({"files": ["dist/**"], "workspaceFiles": ["**"]}, "cache.outputs.workspaceFiles[0]"),
    ],
)
def test_outputs_that_could_take_what_is_not_the_tasks_are_refused_at_load(repo, outputs, field):
    """`.git`, `.vx`, the task's own inputs (`src/**` with inputs `src/**`) and the whole
    workspace are refused when the config loads: file, field, hint, exit 2, nothing run."""
    task = build_task(deps=())
    task["cache"]["outputs"] = outputs
    repo.write(
        npm_workspace({"app": {"tasks": {"build": task}, "files": {"src/a.js": "A;"}}})
    ).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 2, res.err
    assert "packages/app/vx.config.json" in res.err and field in res.err, res.err
    assert "hint" in res.err.lower() and "Traceback" not in res.err
    assert not (repo.root / "packages/app/dist").exists()


RACER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
SYS_renameat2, AT_FDCWD, RENAME_EXCHANGE = 316, -100, 2  # x86-64
dist, outside, stop, limit = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sub, lnk = os.path.join(dist, "sub").encode(), os.path.join(dist, "lnk").encode()
open(os.path.join(outside, "..", "racer-ready"), "w").close()
swaps = 0
for i in range(limit):
    if i % 256 == 0 and os.path.exists(stop):
        break
    try:
        os.symlink(outside, lnk)
    except FileExistsError:
        pass
    except FileNotFoundError:  # dist itself is not there (yet, or wiped)
        continue
    if libc.syscall(SYS_renameat2, AT_FDCWD, sub, AT_FDCWD, lnk, RENAME_EXCHANGE) == 0:
        swaps += 1
print(swaps)
"""


@pytest.mark.skipif(
    os.uname().machine != "x86_64", reason="the racer calls renameat2 by its x86-64 number"
)
def test_a_directory_swapped_for_a_symlink_mid_restore_never_redirects_a_write(repo, tmp_path):
    """A process keeps exchanging `dist/sub` with a symlink to a directory outside the
    workspace (renameat2 RENAME_EXCHANGE) while its 4,000 stale files are wiped and restored.
    Whatever the interleaving, nothing outside is ever written or removed: every unlink and
    write goes through a directory descriptor opened without following links."""
    gen = (
        "node -e \"const fs=require('fs');if(!fs.existsSync('../../allow'))process.exit(3);"
        "fs.mkdirSync('dist/sub',{recursive:true});"
        "for(let i=0;i<4000;i++)fs.writeFileSync('dist/sub/f'+i+'.txt',String(i))\""
    )
    repo.write(one_build(gen)).commit()
    (repo.root / "allow").write_text("")
    assert repo.vx("run", "build", "--all").code == 0
    (repo.root / "allow").unlink()  # a miss now fails the task: only the restore may write dist
    dist = repo.root / "packages/app/dist"
    (dist / "sub/f0.txt").write_text("stale")  # not up to date: the restore wipes, then writes
    outside, stop = tmp_path / "outside", tmp_path / "stop"
    outside.mkdir()
    for i in range(4000):  # what an unlink through the swapped directory would delete
        (outside / f"f{i}.txt").write_text("outside")
    before = sorted(os.listdir(outside))
    racer = subprocess.Popen(
        [sys.executable, "-c", RACER, str(dist), str(outside), str(stop), "3000000"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        while not (tmp_path / "racer-ready").exists() and racer.poll() is None:
            time.sleep(0.01)
        res = repo.vx("run", "build", "--all", timeout=300)
    finally:
        stop.write_text("")
        swaps = racer.communicate(timeout=120)[0]
    assert "Traceback" not in res.err, res.err
    assert int(swaps) > 0  # the race really ran
    assert sorted(os.listdir(outside)) == before  # nothing removed there, nothing added
    assert all((outside / name).read_text() == "outside" for name in before)  # nothing written


@pytest.mark.parametrize(
    "bad",
    [
        "packages/app/dist/" + "n" * 300 + ".js",  # a name no file system here holds
        "packages/app/dist/" + "/".join(["d" * 200] * 21) + "/deep.js",  # a path past PATH_MAX
    ],
)
def test_a_member_the_file_system_cannot_hold_is_a_damaged_entry(repo, bad):
    """One such member once made every later run exit 2. Now the entry is refused and
    dropped with one warning, the task runs, the run goes on — and the next run is a plain hit."""
    repo.write(
        npm_workspace(
            {"app": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A;"}}}
        )
    ).commit()
    assert repo.vx("run", "build", "--all").code == 0
    key = only_key(repo)
    plant(repo, key, {"packages/app/dist/out.js": b"A;", bad: b"x"})
    (repo.root / "packages/app/dist/out.js").unlink()
    res = repo.vx("run", "build", "--all")
    assert res.code == 0, res.err
    assert res.task("app#build")["cache"] == "miss"
    warnings = [line for line in res.err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "app#build" in warnings[0], res.err
    assert (repo.root / "packages/app/dist/out.js").read_text() == "A;"
    assert sorted(p.name for p in (repo.root / "packages/app/dist").iterdir()) == ["out.js"]
    again = repo.vx("run", "build", "--all")
    assert again.code == 0 and again.task("app#build")["cache"] == "up-to-date", again.err


def test_an_output_glob_reaching_an_input_withholds_the_save_and_never_wipes_it(repo):
    """`workspaceFiles: ["**/*.js"]` matches the task's own sources and another project's.
    The wipe before the run deletes neither, and the save is withheld with a warning naming the
    file rather than dropping it silently (a hit would then lack it)."""
    wide_workspace(repo, {"files": ["dist/**"], "workspaceFiles": ["**/*.js"]})
    res = repo.vx("run", "build", "--all")
    assert res.code == 0, res.err
    assert (repo.root / "packages/app/src/a.js").read_text() == "A;"
    assert (repo.root / "packages/other/src/main.js").read_text() == "OTHER;"
    assert "not saved to the cache: output packages/" in res.err, res.err
    assert res.task("app#build")["cache"] == "miss"
    assert not list((repo.root / ".vx" / "cache").glob("*.tar.zst"))
