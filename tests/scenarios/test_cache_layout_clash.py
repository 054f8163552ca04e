"""A cache dir named by VX_CACHE_DIR that is also the workspace's default `.vx/cache`: a second vx
run there without the variable (the shared-store layout) used to reset the index's tables
under the first run, which then died with `internal error: OperationalError: no such table:
entries`. Now the second vx refuses (exit 2, naming the dir) and the first run's entries stay."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.workspace import Repo, npm_workspace, vx_env

# `gated` notes it started (ARMED) and waits until the test makes the gate file: the first run
# holds the index open across the second vx's start, with no timing window.
GATED = (
    "node -e \"const fs=require('fs');fs.writeFileSync(process.env.ARMED,'');"
    "const t=setInterval(()=>{if(fs.existsSync(process.env.GATE)){clearInterval(t);"
    "fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/o','g')}},20)\""
)
SEED = "node -e \"require('fs').mkdirSync('dist',{recursive:true});require('fs').writeFileSync('dist/s','s')\""


def _task(command: str, output: str, pass_through: tuple[str, ...] = ()) -> dict:
    return {
        "exec": {"command": command, "env": {"passThrough": list(pass_through)}},
        "cache": {"inputs": {"files": ["*.json"]}, "outputs": {"files": [output]}},
    }


def home_of(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    return home


def _workspace(repo: Repo) -> Repo:
    tasks = {
        "seed": _task(SEED, "dist/s"),
        "gated": _task(GATED, "dist/o", ("ARMED", "GATE")),
    }
    return repo.write(npm_workspace({"app": {"tasks": tasks}})).commit()


def _gated(repo: Repo, env: dict[str, str], armed: Path, gate: Path) -> subprocess.Popen:
    """`vx run gated` started, returned once its task has started (it then holds the index open
    until the test makes `gate`)."""
    first = subprocess.Popen(
        [sys.executable, "-m", "vx", "run", "gated"],
        cwd=repo.root,
        env=vx_env({**env, "ARMED": str(armed), "GATE": str(gate)}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 60  # a bound on a hung run, not a window the test needs
    while not armed.exists():
        if first.poll() is not None or time.monotonic() >= deadline:
            gate.touch()
            out, err = first.communicate(timeout=120)
            raise AssertionError(f"the gated task never started: {first.returncode} {out} {err}")
        time.sleep(0.02)
    return first


@pytest.mark.feature("LC-02")
@pytest.mark.parametrize("second", (("run", "--dry=json", "seed"), ("run", "seed")))
def test_a_default_layout_vx_never_resets_a_named_cache_dir_in_use(repo, tmp_path, second):
    """A dry run while the first run holds the index open, a plain run (which waits for the
    first's run lock) once it is done: each refuses, and the entries saved in the dir stay."""
    _workspace(repo)
    dry = any(a.startswith("--dry") for a in second)
    default = {"HOME": str(home_of(tmp_path)), "VX_SHARED_STORE": "1"}
    cache = repo.root / ".vx" / "cache"
    named = {"HOME": default["HOME"], "VX_CACHE_DIR": str(cache)}
    seeded = repo.vx("run", "seed", env=named)
    assert seeded.code == 0 and seeded.task("app#seed")["cache"] == "miss", seeded.err
    armed, gate = tmp_path / "armed", tmp_path / "gate"
    first = _gated(repo, named, armed, gate)
    try:
        # the default layout: no VX_CACHE_DIR, the repository's shared store
        if dry:
            other = repo.vx(*second, env=default, summary=False)
    finally:
        gate.touch()
        out, err = first.communicate(timeout=120)
    assert "internal error" not in err and first.returncode == 0, err
    if not dry:  # a plain run waits for the first's run lock: it meets the index after it
        other = repo.vx(*second, env=default, summary=False)
    assert other.code == 2, (other.code, other.out, other.err)
    assert str(cache) in other.err and "VX_CACHE_DIR" in other.err, other.err
    assert "internal error" not in other.err, other.err
    again = repo.vx("run", "seed", "gated", env=named)
    assert again.code == 0, again.err
    assert {again.task(t)["cache"] for t in ("app#seed", "app#gated")} <= {"local", "up-to-date"}
    assert os.path.exists(cache / "cache.db")


@pytest.mark.feature("LC-02")
def test_an_index_reset_under_a_run_is_a_refusal_not_an_internal_error(repo, tmp_path):
    """Another vx version still resets an index of a schema it does not know: a run whose tables
    go while it holds the index open stops with a refusal (exit 2) that says so, never with
    `internal error: OperationalError`."""
    _workspace(repo)
    cache = repo.root / ".vx" / "cache"
    named = {"HOME": str(home_of(tmp_path)), "VX_CACHE_DIR": str(cache)}
    armed, gate = tmp_path / "armed", tmp_path / "gate"
    first = _gated(repo, named, armed, gate)
    try:
        db = sqlite3.connect(cache / "cache.db", timeout=30)
        db.execute("DROP TABLE entries")  # as an older vx's reset does
        db.close()
    finally:
        gate.touch()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 2 and "internal error" not in err, err
    assert "error: the cache index changed under this run: no such table: entries" in err, err


@pytest.mark.feature("LC-02")
@pytest.mark.parametrize("made_by", ("named", "default"))
def test_a_receipt_made_under_one_layout_never_replays_under_the_other(repo, tmp_path, made_by):
    """A warm run's receipt names the cache and store dirs its run used. A run of the other
    layout on the same `.vx/cache` neither replays that receipt (its index is the other layout's)
    nor resets the index: it is the same refusal as a full run's, and the outputs and entries
    stay. Both orders, a restore (outputs gone) included."""
    _workspace(repo)
    cache = repo.root / ".vx" / "cache"
    home = str(home_of(tmp_path))
    layouts = {
        "named": {"HOME": home, "VX_CACHE_DIR": str(cache), "VX_TIMING": "1"},
        "default": {"HOME": home, "VX_SHARED_STORE": "1", "VX_TIMING": "1"},
    }
    other = layouts["default" if made_by == "named" else "named"]
    for _ in range(3):  # build, the full run that writes the receipt, a replay
        made = repo.vx("run", "seed", env=layouts[made_by], summary=False)
        assert made.code == 0, made.err
    assert "receipt check" in made.err, made.err  # the receipt holds for its own layout
    for gone in (False, True):
        if gone:
            (repo.root / "packages" / "app" / "dist" / "s").unlink()
        clash = repo.vx("run", "seed", env=other, summary=False)
        assert clash.code == 2 and "receipt check" not in clash.err, (clash.code, clash.err)
        assert str(cache) in clash.err and "internal error" not in clash.err, clash.err
    again = repo.vx("run", "seed", env=layouts[made_by], summary=False)
    assert again.code == 0 and (repo.root / "packages" / "app" / "dist" / "s").read_text() == "s", (
        again.err
    )
