"""A full disk costs the cache, never the build (docs/caching.md, "What vx promises").

The cache dir sits on a 20 MiB tmpfs filled to four states — nothing free (the cache dir cannot
be made), a few KiB (the index cannot open), room for the index but not the artifact, room for
the artifact but not its index row — and each run must build everything, warn once with the
prune hint, and leave an index that agrees with the artifacts. A full workspace disk during a
restore fails that task alone.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from support.workspace import build_task, npm_workspace

BIG_OUTPUT = (
    "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});"
    "fs.writeFileSync('dist/big.bin',require('crypto').randomBytes(1000000))\""
)
BIG_LOG = (
    "node -e \"const fs=require('fs');fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/o.js','o');"
    "process.stdout.write(require('crypto').randomBytes(1000000).toString('hex'))\""
)


def mounted(path: Path, size: str = "20m"):
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.decode().strip() or 'not root'})")


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False)


def fill(mount: Path, leave_kib: int) -> Path:
    """Take all of the tmpfs but `leave_kib` KiB."""
    st = os.statvfs(mount)
    filler = mount / "filler"
    take = st.f_bavail * st.f_frsize - leave_kib * 1024
    with open(filler, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, take)
    return filler


def two_packages(repo, command: str) -> None:
    repo.write(
        npm_workspace(
            {
                "lib": {
                    "tasks": {"build": build_task(deps=(), command=command)},
                    "files": {"src/a.js": "L;"},
                },
                "app": {
                    "deps": ["lib"],
                    "tasks": {"build": build_task(command=command)},
                    "files": {"src/a.js": "A;"},
                },
            }
        )
    ).commit()


def index_agrees(cache: Path) -> None:
    db = sqlite3.connect(cache / "cache.db")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = {k for (k,) in db.execute("SELECT hash FROM entries")}
    finally:
        db.close()
    on_disk = {p.name.split(".")[0] for p in cache.glob("*.tar.zst")}
    assert rows == on_disk
    assert not list(cache.glob(".*.tmp"))


@pytest.mark.parametrize(
    "state, leave_kib, command",
    [
        ("nothing free: the cache dir cannot be made", 0, BIG_OUTPUT),
        ("a few KiB: the index cannot open", 16, BIG_OUTPUT),
        ("room for the index, not the artifact", 200, BIG_OUTPUT),
        ("room for the artifact, not its index row", 1300, BIG_LOG),
    ],
)
def test_a_full_cache_disk_never_fails_the_build(repo, tmp_path, state, leave_kib, command):
    two_packages(repo, command)
    mount = tmp_path / "cachefs"
    mounted(mount)
    try:
        cache = mount / "cache"
        filler = fill(mount, leave_kib)
        res = repo.vx("run", "build", "--all", "--cache-dir", str(cache))
        assert res.code == 0, (state, res.err)
        assert set(res.statuses().values()) == {("success", "miss")}, (state, res.statuses())
        for pkg in ("lib", "app"):
            assert any((repo.root / f"packages/{pkg}/dist").iterdir())
        warnings = [line for line in res.err.splitlines() if "warning" in line]
        assert len(warnings) == 1 and "vx cache prune" in warnings[0], (state, res.err)
        assert "Traceback" not in res.err and "internal error" not in res.err
        filler.unlink()  # space again (SQLite itself needs some to open the index and look)
        if (cache / "cache.db").exists():
            index_agrees(cache)
        again = repo.vx("run", "build", "--all", "--cache-dir", str(cache))
        assert again.code == 0 and "warning" not in again.err, again.err
        index_agrees(cache)
        third = repo.vx("run", "build", "--all", "--cache-dir", str(cache))
        assert set(third.statuses().values()) <= {
            ("success", "up-to-date"),
            ("success", "local"),
        }, third.statuses()
    finally:
        unmount(mount)


def test_a_full_workspace_disk_during_a_restore_fails_that_task_only(repo, tmp_path):
    """docs' dist is a full tmpfs (the filler beside its outputs, `dist/sub/**`): its restore fails,
    clearly, as that task's failure; lib, beside it, restores and the run finishes (exit 1, not 2)."""
    docs = BIG_OUTPUT.replace("'dist'", "'dist/sub'").replace("dist/big.bin", "dist/sub/big.bin")
    repo.write(
        npm_workspace(
            {
                "lib": {
                    "tasks": {"build": build_task(deps=(), command=BIG_OUTPUT)},
                    "files": {"src/a.js": "L;"},
                },
                "docs": {
                    "tasks": {"build": build_task(deps=(), command=docs, outputs=("dist/sub/**",))},
                    "files": {"src/a.js": "D;"},
                },
            }
        )
    ).commit()
    assert repo.vx("run", "build", "--all").code == 0
    dist = repo.root / "packages/docs/dist"
    shutil.rmtree(dist)
    (repo.root / "packages/lib/dist/big.bin").unlink()
    mounted(dist, "2m")
    try:
        fill(dist, 0)
        res = repo.vx("run", "build", "--all")
        assert res.code == 1, res.err
        assert res.task("docs#build")["status"] == "failed"
        assert (
            "docs#build > failed (restore failed: cannot restore packages/docs/dist/sub/big.bin: No space"
            in res.out
        )
        assert "No space left on device" in res.err and "docs#build" in res.err, res.err
        assert (
            res.task("lib#build")["status"] == "success"
            and res.task("lib#build")["cache"] == "local"
        )
        assert (repo.root / "packages/lib/dist/big.bin").stat().st_size == 1000000
        assert "Traceback" not in res.err and "internal error" not in res.err
    finally:
        unmount(dist)


def test_a_full_cache_disk_leaves_no_temp_file_behind(repo, tmp_path):
    """Every write into the cache dir that fails for want of space takes its temp file with it:
    the toolchain memo (relearnt here, so this run must write it) among them."""
    two_packages(repo, BIG_OUTPUT)
    mount = tmp_path / "cachefs"
    mounted(mount)
    try:
        cache = mount / "cache"
        for _ in range(2):  # the first makes the cache dir, the second the memo in it
            assert repo.vx("run", "build", "--all", "--cache-dir", str(cache)).code == 0
        (cache / "toolchains.json").unlink()
        (repo.root / "packages/lib/src/a.js").write_text("L2;")  # a miss, with more to write
        filler = fill(mount, 0)
        for _ in range(2):
            res = repo.vx("run", "build", "--all", "--cache-dir", str(cache))
            assert res.code == 0, res.err
            left = [str(p.relative_to(cache)) for p in cache.rglob("*") if ".tmp" in p.name]
            assert left == [], left
        filler.unlink()
        assert repo.vx("run", "build", "--all", "--cache-dir", str(cache)).code == 0
        assert (cache / "toolchains.json").exists()  # written once there is room
    finally:
        unmount(mount)
