"""One store per repository (LC-02, issue 16 item 4): worktrees and clones of one repository share
`~/.vx/<id>/cache`, each keeping its own stamps; the store is private to its user at every level,
and an unsafe home keeps the cache in the workspace."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import needs
from support.store import plant_artifact
from support.workspace import GIT_ENV, SRC, Repo, build_task, npm_workspace

PACKAGES = ("a", "b", "c")
HITS = {"local", "up-to-date"}  # restored, or already current


def chain(repo: Repo) -> Repo:
    """Three packages, c -> b -> a, each building dist/out.js from src."""
    packages = {
        name: {
            "deps": list(PACKAGES[:i][-1:]),
            "tasks": {"build": build_task()},
            "files": {"src/index.js": f"module.exports = '{name}';\n"},
        }
        for i, name in enumerate(PACKAGES)
    }
    return repo.write(npm_workspace(packages)).commit()


def home_of(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700, exist_ok=True)
    os.chmod(home, 0o700)
    return home


def shared(home: Path) -> dict[str, str]:
    """The environment of a run that uses the shared store (the suite turns it off by default)."""
    return {"HOME": str(home), "VX_SHARED_STORE": "1"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **GIT_ENV},
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def worktree(repo: Repo, dest: Path) -> Repo:
    git(repo.root, "worktree", "add", "-q", str(dest))
    return Repo(dest)


def clone(origin: Path, dest: Path, remote: str) -> Repo:
    git(origin.parent, "clone", "-q", str(origin), str(dest))
    git(dest, "remote", "set-url", "origin", remote)
    return Repo(dest)


def stores(home: Path) -> list[Path]:
    return sorted((home / ".vx").glob("*/cache")) if (home / ".vx").is_dir() else []


def artifacts(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.tar.zst"))


def caches(result) -> dict[str, str]:
    return {tid: cache for tid, (_status, cache) in result.statuses().items()}


def outputs(repo: Repo) -> dict[str, bytes]:
    return {p: (repo.root / "packages" / p / "dist" / "out.js").read_bytes() for p in PACKAGES}


@pytest.mark.feature("LC-02")
def test_a_second_worktrees_first_build_is_all_hits(repo, tmp_path):
    """Two `git worktree`s of one repository (no remote: the id comes from the root commit): the
    second's first `vx run build` restores every task from what the first saved, and writes no
    artifact of its own."""
    home = home_of(tmp_path)
    chain(repo)
    first = repo.vx("run", "build", env=shared(home))
    assert first.code == 0, first.err
    assert set(caches(first).values()) == {"miss"}
    other = worktree(repo, tmp_path / "second")
    res = other.vx("run", "build", env=shared(home))
    assert res.code == 0, res.err
    assert caches(res) == {f"{p}#build": "local" for p in PACKAGES}
    assert outputs(other) == outputs(repo)
    [store] = stores(home)
    assert len(artifacts(store)) == len(PACKAGES)
    assert artifacts(other.root / ".vx" / "cache") == []
    assert artifacts(repo.root / ".vx" / "cache") == []
    # Each workspace keeps its own stamps: the second's warm run is current, not a restore.
    again = other.vx("run", "build", env=shared(home))
    assert caches(again) == {f"{p}#build": "up-to-date" for p in PACKAGES}


@pytest.mark.feature("LC-02")
def test_clones_with_one_remote_share_and_another_remote_does_not(repo, tmp_path):
    """Two clones whose `origin` spells one repository two ways (scp-like ssh and https, case and
    `.git` aside) share a store; a clone of another remote gets its own."""
    home = home_of(tmp_path)
    chain(repo)
    a = clone(repo.root, tmp_path / "a", "git@github.com:Acme/Shop.git")
    b = clone(repo.root, tmp_path / "b", "https://github.com/acme/shop/")
    c = clone(repo.root, tmp_path / "c", "https://github.com/acme/other.git")
    assert set(caches(a.vx("run", "build", env=shared(home))).values()) == {"miss"}
    res = b.vx("run", "build", env=shared(home))
    assert res.code == 0, res.err
    assert set(caches(res).values()) == {"local"}
    assert outputs(b) == outputs(a)
    assert len(stores(home)) == 1
    assert set(caches(c.vx("run", "build", env=shared(home))).values()) == {"miss"}
    assert len(stores(home)) == 2


@pytest.mark.feature("LC-02")
def test_every_level_of_the_store_is_private(repo, tmp_path):
    """~/.vx, ~/.vx/<id> and its cache dir are 0700 — a ~/.vx left readable by others is tightened."""
    home = home_of(tmp_path)
    (home / ".vx").mkdir(mode=0o755)
    os.chmod(home / ".vx", 0o755)
    chain(repo)
    assert repo.vx("run", "build", env=shared(home)).code == 0
    [store] = stores(home)
    for level in (home / ".vx", store.parent, store):
        assert stat.S_IMODE(os.lstat(level).st_mode) == 0o700, level


@pytest.mark.feature("LC-02")
@pytest.mark.parametrize("unsafe", ["home writable by others", "~/.vx a symlink", "id dir 0770"])
def test_an_unsafe_home_keeps_the_cache_in_the_workspace(repo, tmp_path, unsafe):
    """A home others can write, or a level of the store that is a symlink or writable by others:
    the run says so once, keeps its cache in .vx/cache, and puts nothing in the store."""
    home = home_of(tmp_path)
    chain(repo)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    if unsafe == "home writable by others":
        os.chmod(home, 0o777)
    elif unsafe == "~/.vx a symlink":
        (home / ".vx").symlink_to(elsewhere)
    else:
        probe = repo.vx("run", "build", "--dry", env=shared(home))  # makes the levels
        assert probe.code == 0, probe.err
        [store] = stores(home)
        os.chmod(store.parent, 0o770)
    res = repo.vx("run", "build", env=shared(home))
    assert res.code == 0, res.err
    assert res.err.count("the shared cache store is off") == 1, res.err
    assert len(artifacts(repo.root / ".vx" / "cache")) == len(PACKAGES)
    assert list(elsewhere.iterdir()) == []
    assert all(artifacts(s) == [] for s in stores(home) if not (home / ".vx").is_symlink())
    warm = repo.vx("run", "build", env=shared(home))
    assert set(caches(warm).values()) == {"up-to-date"}


@pytest.mark.feature("LC-02")
def test_a_named_cache_dir_or_the_switch_still_wins(repo, tmp_path):
    """`VX_CACHE_DIR` (like `cacheDir` and `--cache-dir`) holds everything and shares nothing, and
    `VX_SHARED_STORE=0` keeps the cache in .vx/cache: neither touches ~/.vx."""
    home = home_of(tmp_path)
    chain(repo)
    named = tmp_path / "named"
    res = repo.vx("run", "build", env={**shared(home), "VX_CACHE_DIR": str(named)})
    assert res.code == 0, res.err
    assert len(artifacts(named)) == len(PACKAGES) and (named / "cache.db").is_file()
    res = repo.vx("run", "build", "--force", env={"HOME": str(home), "VX_SHARED_STORE": "0"})
    assert res.code == 0, res.err
    assert len(artifacts(repo.root / ".vx" / "cache")) == len(PACKAGES)
    assert not (home / ".vx").exists()


def plant(store: Path, key: str, members: dict[str, bytes]) -> None:
    """What anyone able to write the shared store could leave in place of `key`'s artifact."""
    plant_artifact(store, "store.db", key, members)


def tree(root: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file under root but .git and .vx: (inode, mtime_ns, bytes)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith((".git", ".vx")):
            st = path.stat()
            out[rel] = (st.st_ino, st.st_mtime_ns, path.read_bytes())
    return out


@pytest.mark.feature("LC-02")
def test_an_entry_of_the_shared_store_writes_only_into_the_workspace_that_runs(repo, tmp_path):
    """A restore from the shared store writes into the worktree that runs and nowhere else: the
    first worktree's files are untouched by the second's restores, and an entry whose members
    climb into the other worktree (`../`, or its absolute path) is a miss with a warning."""
    home = home_of(tmp_path)
    chain(repo)
    assert repo.vx("run", "build", env=shared(home)).code == 0
    before = tree(repo.root)
    other = worktree(repo, tmp_path / "second")
    assert set(caches(other.vx("run", "build", env=shared(home))).values()) == {"local"}
    assert tree(repo.root) == before
    [store] = stores(home)
    key_a = other.vx("run", "build", env=shared(home)).task("a#build")["hash"]
    for hostile in (
        "../../../ws/packages/a/dist/evil.js",
        str(repo.root / "packages" / "a" / "dist" / "evil.js").lstrip("/"),
        str(repo.root / "packages" / "a" / "dist" / "evil.js"),
    ):
        plant(store, key_a, {hostile: b"planted"})
        for dist in (other.root / "packages").glob("*/dist"):
            subprocess.run(["rm", "-rf", str(dist)], check=True)
        res = other.vx("run", "build", env=shared(home))
        assert res.code == 0, res.err
        assert res.task("a#build")["cache"] == "miss", (hostile, res.err)
        assert "warning" in res.err, res.err
        assert tree(repo.root) == before, hostile
        assert not list(tmp_path.rglob("evil.js")), hostile


@pytest.mark.feature("LC-02")
def test_worktrees_building_at_once_share_one_consistent_store(repo, tmp_path):
    """Two worktrees save the same entries at the same time: both runs succeed, the store holds one
    row and one artifact per key, and afterwards each worktree's run is all hits."""
    home = home_of(tmp_path)
    chain(repo)
    other = worktree(repo, tmp_path / "second")
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("VX_", "CI"))},
        "PYTHONPATH": SRC,
        "NO_COLOR": "1",
        **shared(home),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "vx", "run", "build"],
            cwd=r.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        for r in (repo, other)
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    [store] = stores(home)
    with sqlite3.connect(store / "store.db") as db:
        rows = db.execute("SELECT hash FROM entries").fetchall()
    assert len(rows) == len(PACKAGES) == len(artifacts(store))
    for r in (repo, other):
        assert set(caches(r.vx("run", "build", env=shared(home))).values()) <= HITS


@pytest.mark.feature("LC-02")
def test_cache_prune_sees_the_shared_store(repo, tmp_path):
    """`vx cache prune` in one worktree prunes the repository's store: what it evicts is gone for
    the other worktree too, and `vx info` names the store."""
    home = home_of(tmp_path)
    chain(repo)
    assert repo.vx("run", "build", env=shared(home)).code == 0
    other = worktree(repo, tmp_path / "second")
    info = other.vx("info", env=shared(home))
    [store] = stores(home)
    assert str(store) in info.out, info.out
    pruned = other.vx("cache", "prune", "--max-size", "1B", env=shared(home))
    assert pruned.code == 0, pruned.err
    assert artifacts(store) == []
    for dist in (repo.root / "packages").glob("*/dist"):
        subprocess.run(["rm", "-rf", str(dist)], check=True)
    assert set(caches(repo.vx("run", "build", env=shared(home))).values()) == {"miss"}


@pytest.mark.feature("LC-02")
@needs("bwrap", "strace", "node")
def test_a_sandboxed_task_sees_the_shared_store_empty(repo, tmp_path):
    """The shared store lies outside the workspace, in the home a sandbox leaves readable: a
    sandboxed task sees it as an empty directory (SB-15), so it can neither read another
    workspace's artifacts nor plant one."""
    home = home_of(tmp_path)
    task = {
        "exec": {"command": "echo built", "sandbox": {"allow": {"read": [], "write": []}}},
        "cache": {"inputs": {"files": ["src/**"]}, "outputs": {"files": ["dist/**"]}},
    }
    chain(repo)
    assert repo.vx("run", "build", env=shared(home)).code == 0  # the store holds entries
    [store] = stores(home)
    assert artifacts(store)
    look = {
        "exec": {
            "command": f"find {store} -type f 2>/dev/null | wc -l | sed 's/^/store files: /'",
            "sandbox": {"allow": {"read": [], "write": []}},
        }
    }
    repo.write(
        {"packages/a/vx.config.json": {"tasks": {"build": build_task(), "t": task, "look": look}}}
    ).commit()
    res = repo.vx("run", "look", cwd="packages/a", env=shared(home))
    assert res.code == 0, res.out + res.err
    assert "store files: 0" in res.out, res.out


@pytest.mark.feature("LC-02")
def test_vx_why_reads_the_shared_store(repo, tmp_path):
    """`vx why` says why a task was not saved until an entry for its key exists, and with a
    shared store that entry is in the store, not in the workspace's index."""
    home = home_of(tmp_path)
    edit = (
        "node -e \"const fs=require('fs');if(process.env.EDIT)fs.appendFileSync('src/index.js','//');"
        "fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/out.js','a')\""
    )
    task = build_task(deps=(), command=edit)
    task["exec"]["env"] = {"passThrough": ["EDIT"]}
    files = {"src/index.js": "A;"}
    repo.write(npm_workspace({"a": {"tasks": {"build": task}, "files": files}})).commit()
    assert repo.vx("run", "build", env={**shared(home), "EDIT": "1"}).code == 0
    why = repo.vx("why", "a#build", summary=False, env=shared(home))
    assert why.code == 0, why.err
    assert "input changed while it ran: packages/a/src/index.js" in why.out, why.out
    repo.git("checkout", "--", "packages/a/src/index.js")
    assert repo.vx("run", "build", env=shared(home)).code == 0
    why = repo.vx("why", "a#build", summary=False, env=shared(home))
    assert "not saved" not in why.out, why.out


@pytest.mark.feature("LC-02")
def test_a_receipt_is_not_replayed_from_a_store_others_can_write(repo, tmp_path):
    """A replayed run reads the shared store's artifacts by path: once a level of the store is
    writable by others, the receipt no longer vouches for it, and the run goes through the
    pipeline, which keeps the cache in the workspace and says why."""
    home = home_of(tmp_path)
    chain(repo)
    for _ in range(2):  # a build, then a run of hits that writes the receipt
        assert repo.vx("run", "build", env=shared(home), summary=False).code == 0
    assert list((repo.root / ".vx" / "receipts").iterdir())
    [store] = stores(home)
    os.chmod(store.parent, 0o777)
    res = repo.vx("run", "build", env=shared(home), summary=False)
    assert res.code == 0, res.err
    assert "the shared cache store is off" in res.err, res.err


@pytest.mark.feature("LC-02")
def test_a_workspace_moves_between_its_own_cache_and_the_shared_store(repo, tmp_path):
    """The workspace's index has a layout of its own when it sits beside a shared store. A run
    of the other layout refuses the index (exit 2, naming the dir, with the way out) and never
    resets it: another run may hold it open, and its entries stay. Once it is removed, the move
    is made — never a hit on an entry the other layout left, never an error."""
    home = home_of(tmp_path)
    chain(repo)
    alone = {"HOME": str(home), "VX_SHARED_STORE": "0"}
    assert set(caches(repo.vx("run", "build", env=alone)).values()) == {"miss"}
    local = repo.root / ".vx" / "cache"
    assert len(artifacts(local)) == len(PACKAGES)
    res = repo.vx("run", "build", env=shared(home))
    assert res.code == 2, res.err
    assert f"error: the cache dir {local} holds its own entries" in res.err, res.err
    assert f"rm -rf {local}" in res.err, res.err
    assert len(artifacts(local)) == len(PACKAGES)
    assert set(caches(repo.vx("run", "build", env=alone)).values()) <= HITS
    shutil.rmtree(local)
    res = repo.vx("run", "build", env=shared(home))
    assert res.code == 0, res.err
    assert set(caches(res).values()) == {"miss"} and artifacts(local) == []
    res = repo.vx("run", "build", env=alone)
    assert res.code == 2 and "is a workspace's index beside the repository's shared" in res.err
    shutil.rmtree(local)
    res = repo.vx("run", "build", env=alone)
    assert res.code == 0, res.err
    assert set(caches(res).values()) == {"miss"}
    shutil.rmtree(local)
    assert set(caches(repo.vx("run", "build", env=shared(home))).values()) <= HITS


@pytest.mark.feature("LC-02")
def test_a_planted_repo_id_link_is_never_written_through(repo, tmp_path):
    """A repository (no remote) that commits `.vx/cache/repo-id` as a link out of the workspace,
    dangling or to a file of the user's: vx neither writes its memo of the root commit through the
    link nor takes the linked file for the repository's identity — the run is refused (exit 2,
    naming the link) before either is read."""
    home = home_of(tmp_path)
    chain(repo)
    memo = repo.root / ".vx" / "cache" / "repo-id"
    memo.parent.mkdir(parents=True)
    target = tmp_path / "planted"  # dangling: a write through the link would create it
    os.symlink(target, memo)
    repo.git("add", "-f", ".vx/cache/repo-id")
    repo.commit("a hostile memo")
    res = repo.vx("run", "build", env=shared(home))
    assert res.code == 2 and "error: .vx/cache/repo-id is a symlink" in res.err, res.err
    assert not os.path.lexists(target), "the memo was written through the planted link"
    # a link to a file of the user's: its text is no identity, and no store is made from it
    victim = tmp_path / "notes.txt"
    victim.write_text("commit:0000\n")
    memo.unlink()
    os.symlink(victim, memo)
    again = repo.vx("run", "build", env=shared(home))
    assert again.code == 2 and "error: .vx/cache/repo-id is a symlink" in again.err, again.err
    assert victim.read_text() == "commit:0000\n"
    assert stores(home) == []


@pytest.mark.feature("LC-02")
@pytest.mark.parametrize("how", ("committed-link", "named-dir"))
def test_a_cache_dir_of_the_users_keeps_their_files(repo, tmp_path, how):
    """The cache dir is a directory of the user's: `.vx/cache` a link a repository committed (the
    split layout's first run used to delete every `*.tar.zst` there; now the run and the prune
    are refused, naming the link), or one named with --cache-dir (`vx cache prune` swept its old
    `*.tar.zst` and `.*.tmp`). vx removes only the files it names itself."""
    home = home_of(tmp_path)
    mine = tmp_path / "backups"
    mine.mkdir()
    theirs = {"photos-2025.tar.zst": "precious", ".notes.tmp": "draft", ".vim.old": "v"}
    for name, text in theirs.items():
        (mine / name).write_text(text)
        os.utime(mine / name, (0, 0))  # older than the sweep's hour
    chain(repo)
    flags: tuple[str, ...] = ()
    if how == "committed-link":
        (repo.root / ".vx").mkdir()
        os.symlink(mine, repo.root / ".vx" / "cache")
        repo.git("add", "-f", ".vx/cache")
        repo.commit("a linked cache dir")
        env = shared(home)
    else:
        flags, env = ("--cache-dir", str(mine)), {}
    code = 2 if how == "committed-link" else 0
    res = repo.vx("run", "build", *flags, env=env)
    assert res.code == code, res.err
    pruned = repo.vx("cache", "prune", "--max-size", "1B", *flags, env=env)
    assert pruned.code == code, pruned.err
    for name, text in theirs.items():
        assert (mine / name).read_text() == text, name
