"""What a hostile repository can commit in place of vx's own state (issue 19): `.vx` or a
directory vx keeps in it as a symlink out of the workspace. vx refuses such a workspace, naming
the link, and writes nothing through it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from support.store import plant_artifact
from support.workspace import Repo, build_task, npm_workspace


def one_package(repo: Repo) -> Repo:
    return repo.write(
        npm_workspace(
            {"a": {"tasks": {"build": build_task()}, "files": {"src/index.js": "exports.a = 1;\n"}}}
        )
    )


def listing(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(directory.rglob("*"))
    }


@pytest.mark.feature("LC-03")
@pytest.mark.parametrize("link", [".vx", ".vx/cache", ".vx/receipts"])
def test_a_committed_link_in_place_of_vx_state_is_refused(repo, tmp_path, link):
    """A repository commits `link` as a symlink to a directory outside the workspace holding 40
    files of the user's. Before, vx wrote its index, memos and receipts there, and a receipt's
    pruning kept only the newest 32 files it found: eight of the user's files were deleted. Now
    every run exits 2 naming the link, and the directory is exactly as it was."""
    outside = tmp_path / "outside"
    outside.mkdir()
    for i in range(40):
        (outside / f"note{i:02}.json").write_text(f"{i}\n")
    before = listing(outside)
    one_package(repo)
    (repo.root / link).parent.mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(outside, (repo.root / link).parent), repo.root / link)
    repo.commit()
    repo.git("add", "-f", link)
    repo.commit("the link")
    assert repo.git("ls-files", link).strip() == link
    for _ in range(2):  # the second would be all hits, and write a receipt
        res = repo.vx("run", "build", summary=False)
        assert res.code == 2, (res.code, res.err)
        assert f"error: {link} is a symlink to " in res.err, res.err
        assert "Traceback" not in res.err
    assert listing(outside) == before
    info = repo.vx("info")  # a report: it names the link where the workspace would be
    assert f"{link} is a symlink" in info.out, info.out
    for verb in (("cache", "prune", "--max-size", "1G"), ("last",), ("watch", "build")):
        res = repo.vx(*verb)
        assert res.code == 2, (verb, res.code, res.err)
        assert f"{link} is a symlink" in res.err, res.err
    assert listing(outside) == before


@pytest.mark.feature("LC-02")
@pytest.mark.parametrize("cache", [".vx/cache", "ci-cache"])
def test_a_cache_a_repository_ships_is_never_served(repo, tmp_path, cache):
    """A repository commits a prefilled cache — its index and an artifact whose `dist/out.js` is
    the attacker's — as `.vx/cache` (where vx keeps it with the shared store off, and outside git)
    or as a cache dir its `vx.workspace.json` names. Before, a fresh clone's first `vx run build`
    was a local hit that restored the planted file. Now the run exits 2 naming the tracked file,
    and builds nothing from it."""
    one_package(repo)
    if cache != ".vx/cache":
        repo.write({"vx.workspace.json": {"cacheDir": cache}})
    repo.commit()
    first = repo.vx("run", "build")
    assert first.code == 0, first.err
    key = first.task("a#build")["hash"]
    plant_artifact(repo.root / cache, "cache.db", key, {"packages/a/dist/out.js": b"planted\n"})
    repo.git("add", "-f", cache)
    repo.commit("a prefilled cache")
    clone = Repo(tmp_path / "clone")
    repo.git("clone", "-q", str(repo.root), str(clone.root))
    assert (clone.root / cache / "cache.db").is_file()
    res = clone.vx("run", "build")
    assert res.code == 2, (res.code, res.err, res.statuses())
    assert f"error: git tracks {cache}/" in res.err, res.err
    assert not (clone.root / "packages/a/dist/out.js").exists()


@pytest.mark.feature("OBS-13")
def test_a_cache_dir_the_config_names_keeps_the_users_logs(repo, tmp_path):
    """A repository's `vx.workspace.json` names a directory of the user's as its cache dir, and a
    task fails: vx keeps its failure log in `<cache>/logs` and prunes that to the newest 50.
    Before, the pruning took any `*.log` there, so 60 logs of the user's lost ten; now it
    removes only the logs vx names (`<run id>-<task>.log`)."""
    mine = tmp_path / "mine"
    (mine / "logs").mkdir(parents=True)
    for i in range(60):
        (mine / "logs" / f"build-{i:02}.log").write_text(f"{i}\n")
    before = listing(mine / "logs")
    fail = {"exec": {"command": "echo broken >&2; exit 1"}}
    repo.write(npm_workspace({"a": {"tasks": {"test": fail}}}))
    repo.write({"vx.workspace.json": {"cacheDir": str(mine)}}).commit()
    res = repo.vx("run", "test")
    assert res.code == 1, res.err
    kept = {name: body for name, body in listing(mine / "logs").items() if name in before}
    assert kept == before
    assert len(listing(mine / "logs")) == 61  # theirs, and the failure's own


@pytest.mark.feature("OBS-03")
def test_the_default_profile_is_never_written_through_a_committed_link(repo, tmp_path):
    """`vx run --profile` writes `profile.json` where the run starts. A repository commits that
    name as a link to a file of the user's: before, the trace replaced the file's contents; now
    the run says it cannot write the profile through a link (exit 2) and the file is intact."""
    victim = tmp_path / "notes.txt"
    victim.write_text("mine\n")
    one_package(repo)
    os.symlink(os.path.relpath(victim, repo.root), repo.root / "profile.json")
    repo.commit()
    res = repo.vx("run", "build", "--profile")
    assert res.code == 2, (res.code, res.err)
    assert "cannot write the profile" in res.err and "it is a symlink" in res.err, res.err
    assert victim.read_text() == "mine\n"


@pytest.mark.feature("LC-03")
def test_a_config_cannot_name_another_repositorys_shared_store(repo, tmp_path):
    """The shared stores under `~/.vx` are each one repository's. A hostile `vx.workspace.json`
    names another repository's store as its `cacheDir`: before, vx read its entries and saved
    into it; now the config is refused (exit 2, naming the field) and the store is untouched."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    other = home / ".vx" / "0123456789abcdef" / "cache"
    other.mkdir(parents=True, mode=0o700)
    one_package(repo)
    repo.write({"vx.workspace.json": {"cacheDir": str(other)}}).commit()
    res = repo.vx("run", "build", env={"HOME": str(home), "VX_SHARED_STORE": "1"})
    assert res.code == 2, (res.code, res.err)
    assert "cacheDir" in res.err and "shared store" in res.err, res.err
    assert listing(other) == {}


def planted_cache(repo: Repo) -> Repo:
    """A built workspace whose `.vx/cache` (the whole store: shared store off) then holds the
    attacker's `dist/out.js` for the key the sources have, outputs gone: what an archive or a
    shared disk can bring. The next run restores it unless the cache is refused."""
    one_package(repo).commit()
    first = repo.vx("run", "build", env={"VX_SHARED_STORE": "0"})
    assert first.code == 0, first.err
    key = first.task("a#build")["hash"]
    plant_artifact(
        repo.root / ".vx/cache", "cache.db", key, {"packages/a/dist/out.js": b"planted\n"}
    )
    (repo.root / "packages/a/dist/out.js").unlink()
    return repo


def chown_tree(top: Path, uid: int) -> None:
    os.chown(top, uid, uid)
    for directory, dirs, files in os.walk(top):
        for name in dirs + files:
            os.chown(os.path.join(directory, name), uid, uid)


needs_root = pytest.mark.skipif(os.getuid() != 0, reason="making another user's files needs root")


@pytest.mark.feature("LC-02")
@needs_root
def test_a_prefilled_cache_another_user_owns_is_refused(repo):
    """Item: untracked prefilled cache. An archive unpacked by root (or a shared disk) keeps the
    owner its files came with: a `.vx` another user owns is refused, as git refuses another
    user's repository, and nothing of it is restored."""
    planted_cache(repo)
    chown_tree(repo.root / ".vx", 4242)
    res = repo.vx("run", "build", env={"VX_SHARED_STORE": "0"})
    assert res.code == 2, (res.code, res.err)
    assert "error: .vx is owned by uid 4242" in res.err and "Traceback" not in res.err, res.err
    assert not (repo.root / "packages/a/dist/out.js").exists()


@pytest.mark.feature("LC-02")
@needs_root
def test_an_artifact_another_user_wrote_is_a_miss(repo):
    """Item: untracked prefilled cache. An artifact another user owns, in a cache this user
    owns, is never restored: a miss that runs the task and saves this user's own."""
    planted_cache(repo)
    key = next(p for p in (repo.root / ".vx/cache").glob("*.tar.zst"))
    os.chown(key, 4242, 4242)
    res = repo.vx("run", "build", env={"VX_SHARED_STORE": "0"})
    assert res.code == 0, res.err
    assert res.task("a#build")["cache"] == "miss", res.statuses()
    assert (repo.root / "packages/a/dist/out.js").read_text() == "exports.a = 1;\n"
    assert key.stat().st_uid == os.getuid()


@pytest.mark.feature("LC-02")
def test_a_cache_restored_by_ci_is_still_served(repo, tmp_path):
    """Item: untracked prefilled cache. A CI job restores `.vx/cache` (actions/cache) into a
    fresh checkout as the same user: its first run is all hits, as before."""
    one_package(repo).commit()
    assert repo.vx("run", "build", env={"VX_SHARED_STORE": "0"}).code == 0
    clone = Repo(tmp_path / "clone")
    repo.git("clone", "-q", str(repo.root), str(clone.root))
    shutil.copytree(repo.root / ".vx/cache", clone.root / ".vx/cache", symlinks=True)
    res = clone.vx("run", "build", env={"VX_SHARED_STORE": "0"})
    assert res.code == 0, res.err
    assert res.task("a#build")["cache"] == "local", res.statuses()
    assert (clone.root / "packages/a/dist/out.js").read_text() == "exports.a = 1;\n"


@pytest.mark.feature("LC-02")
@needs_root
def test_sudo_takes_the_state_of_the_user_who_ran_it(repo):
    """Item: untracked prefilled cache. As git does, root with `SUDO_UID` naming the owner of
    `.vx` takes it as its own: `sudo vx run build` in one's own workspace still hits."""
    one_package(repo).commit()
    assert repo.vx("run", "build", env={"VX_SHARED_STORE": "0"}).code == 0
    chown_tree(repo.root / ".vx", 4242)
    res = repo.vx("run", "build", env={"VX_SHARED_STORE": "0", "SUDO_UID": "4242"})
    assert res.code == 0, res.err
    assert res.task("a#build")["cache"] in ("local", "up-to-date"), res.statuses()


@pytest.mark.feature("LC-02")
@needs_root
def test_a_checkout_git_is_told_to_trust_keeps_its_cache(repo, tmp_path):
    """Item: untracked prefilled cache. A container build over a mounted checkout (root running
    vx in a tree another uid owns) works once the user trusts it as git asks, with
    `safe.directory`: vx takes that checkout's state as git takes its objects, and hits."""
    one_package(repo).commit()
    assert repo.vx("run", "build", env={"VX_SHARED_STORE": "0"}).code == 0
    chown_tree(repo.root, 4242)
    untrusted = repo.vx("run", "build", env={"VX_SHARED_STORE": "0"})
    assert untrusted.code == 2 and "Traceback" not in untrusted.err, untrusted.err
    config = tmp_path / "gitconfig"
    config.write_text(f"[safe]\n\tdirectory = {repo.root}\n")
    env = {"VX_SHARED_STORE": "0", "GIT_CONFIG_GLOBAL": str(config)}
    res = repo.vx("run", "build", env=env)
    assert res.code == 0, res.err
    assert res.task("a#build")["cache"] in ("local", "up-to-date"), res.statuses()
    config.write_text(f"[safe]\n\tdirectory = {repo.root}\n\tdirectory =\n")  # reset: untrusted
    again = repo.vx("run", "build", env=env)
    assert again.code == 2 and "owned by uid 4242" in again.err, again.err


@pytest.mark.feature("LC-02")
@needs_root
def test_a_repositorys_own_config_cannot_vouch_for_it(repo):
    """Item: review of the safe.directory acceptance. git reads `safe.directory` only from the
    system, global and command-line config, never from the repository's own: the owner of the
    checkout writes that one. vx asked `git config` from / so as not to read it, but with
    `GIT_DIR` naming the repository (a hook, a script) it read the repository's entry and took
    the foreign-owned state as this user's."""
    one_package(repo).commit()
    assert repo.vx("run", "build", env={"VX_SHARED_STORE": "0"}).code == 0
    repo.git("config", "--local", "--add", "safe.directory", "*")
    chown_tree(repo.root, 4242)
    env = {"VX_SHARED_STORE": "0", "GIT_DIR": str(repo.root / ".git")}
    res = repo.vx("run", "build", env=env)
    assert res.code == 2 and "owned by uid 4242" in res.err, res.err
    assert "Traceback" not in res.err, res.err


@pytest.mark.feature("LC-02")
@needs_root
def test_a_relative_safe_directory_vouches_for_nothing(repo, tmp_path):
    """Item: review of the safe.directory acceptance. git matches an entry against the
    repository's absolute path, so `safe.directory = .` trusts nothing; vx resolved it from its
    own working directory and so trusted whatever checkout it was run in."""
    one_package(repo).commit()
    assert repo.vx("run", "build", env={"VX_SHARED_STORE": "0"}).code == 0
    chown_tree(repo.root, 4242)
    config = tmp_path / "gitconfig"
    config.write_text("[safe]\n\tdirectory = .\n")
    res = repo.vx("run", "build", env={"VX_SHARED_STORE": "0", "GIT_CONFIG_GLOBAL": str(config)})
    assert res.code == 2 and "owned by uid 4242" in res.err, res.err
    assert "Traceback" not in res.err, res.err
