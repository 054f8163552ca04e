"""Inputs under `.gitattributes` that can run a clean filter (KEY-14): `* text=auto` and Git LFS
keep the index's fast path for the files no filter changed, and an edited file always misses —
before and after `git add`, and where git itself calls the edited file clean once added (a CRLF
copy of an LF blob, an LFS pointer left unsmudged). Real git, real node, real `vx`; real git-lfs when it is
installed, else a clean filter that writes LFS's pointers the way git-lfs does."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support.workspace import build_task, npm_workspace
from test_receipts import run as receipt_run
from test_receipts import settle

BUILD = build_task(deps=())


def caches(result) -> dict[str, str]:
    assert result.code == 0, result.err
    return {tid: cache for tid, (_status, cache) in result.statuses().items()}


def built(repo, env: dict | None = None) -> str:
    """Run the build; its output must be the bytes of the inputs as they are now."""
    result = repo.vx("run", "build", env=env)
    cache = caches(result)["app#build"]
    src = repo.root / "packages/app/src"
    want = b"".join((src / name).read_bytes() for name in sorted(p.name for p in src.iterdir()))
    assert (repo.root / "packages/app/dist/out.js").read_bytes() == want, cache
    return cache


def workspace(repo, gitattributes: str, files: dict[str, str]) -> None:
    tree = npm_workspace({"app": {"tasks": {"build": BUILD}, "files": files}})
    tree[".gitattributes"] = gitattributes
    repo.write(tree)


def write_bytes(repo, rel: str, data: bytes) -> None:
    (repo.root / rel).write_bytes(data)


@pytest.mark.feature("KEY-14")
def test_text_auto_input_misses_on_every_edit(repo):
    workspace(repo, "* text=auto\n", {"src/a.js": "A;\n", "src/b.js": "B;\n"})
    repo.commit()
    assert built(repo) == "miss"
    assert built(repo) == "up-to-date"
    a = "packages/app/src/a.js"
    write_bytes(repo, a, b"A;\r\n")
    assert built(repo) == "miss"  # git says modified: the size is not the index's
    # Added, it is the same blob once cleaned, and git calls it clean.
    repo.git("add", "-A")
    assert repo.git("status", "--porcelain") == ""
    assert built(repo) == "up-to-date"  # the CRLF build of the run before
    write_bytes(repo, a, b"A;\n")
    assert built(repo) == "local"  # the first build, restored
    write_bytes(repo, a, b"A;\r\n")
    assert built(repo, env={"GIT_OPTIONAL_LOCKS": "0"}) == "local"  # the CRLF build, restored
    write_bytes(repo, a, b"C;\n")
    assert built(repo) == "miss"
    write_bytes(repo, a, b"D;\n")
    repo.git("add", "-A")
    assert built(repo) == "miss"
    repo.commit()
    assert built(repo) == "up-to-date"


@pytest.mark.feature("KEY-14")
def test_a_file_git_calls_clean_again_is_judged_again(repo):
    """The verdicts are kept per index file, but which files git calls clean moves without the
    index changing: with no optional locks (so no run rewrites the index), a CRLF copy added, an
    LF edit built (modified: left out of the verdicts), then the CRLF bytes again (clean once
    more, the index as it was). A memo judged while the file was modified left it unjudged, and
    so trusted with the LF blob's OID: the LF build was served for CRLF bytes."""
    quiet = {"GIT_OPTIONAL_LOCKS": "0", "VX_REPLAY": "0"}
    workspace(repo, "* text=auto\n", {"src/a.js": "A;\n", "src/b.js": "B;\n"})
    repo.commit()
    a = "packages/app/src/a.js"
    write_bytes(repo, a, b"A;\r\n")
    repo.git("add", "-A")
    assert repo.git("status", "--porcelain") == ""  # refreshes the index once, before any run
    write_bytes(repo, a, b"A;\n")
    assert built(repo, env=quiet) == "miss"  # modified (another size): judged without it
    write_bytes(repo, a, b"A;\r\n")
    assert built(repo, env=quiet) == "miss"  # clean again, same index: judged now, from disk
    write_bytes(repo, a, b"A;\n")
    assert built(repo, env=quiet) == "local"


@pytest.mark.feature("KEY-14")
def test_text_auto_crlf_copy_added_is_not_replayed(repo):
    """`git add` of a CRLF copy changes only the index's stat data: git's listings read the same
    byte for byte, so a receipt must hold the file's own stat, and the next run is no replay."""
    workspace(repo, "* text=auto\n", {"src/a.js": "A;\n"})
    repo.commit()
    settle(repo)
    assert receipt_run(repo)[1]  # the receipt replays while nothing changed
    listed = repo.git("ls-files", "-s"), repo.git("status", "--porcelain")
    write_bytes(repo, "packages/app/src/a.js", b"A;\r\n")
    repo.git("add", "-A")
    assert (repo.git("ls-files", "-s"), repo.git("status", "--porcelain")) == listed
    result, replayed = receipt_run(repo)
    assert result.code == 0 and not replayed, result.err
    assert (repo.root / "packages/app/dist/out.js").read_bytes() == b"A;\r\n"


def _lfs(repo, tmp: Path) -> None:
    """Git LFS for this repo: the real one if installed, else a clean filter doing what its clean
    does (content -> pointer; a pointer -> itself) and a smudge that leaves the pointer."""
    if shutil.which("git-lfs"):
        repo.git("lfs", "install", "--local")
        return
    clean = tmp / "lfs-clean"
    clean.write_text(
        "#!/bin/sh\n"
        't=$(mktemp); cat >"$t"\n'
        "if head -n 1 \"$t\" | grep -qx 'version https://git-lfs.github.com/spec/v1'; then\n"
        '  cat "$t"\n'
        "else\n"
        "  printf 'version https://git-lfs.github.com/spec/v1\\noid sha256:%s\\nsize %s\\n' "
        '"$(sha256sum <"$t" | cut -d" " -f1)" "$(wc -c <"$t" | tr -d " ")"\n'
        "fi\n"
        'rm -f "$t"\n'
    )
    clean.chmod(0o755)
    repo.git("config", "filter.lfs.clean", str(clean))
    repo.git("config", "filter.lfs.smudge", "cat")
    repo.git("config", "filter.lfs.required", "true")


@pytest.mark.feature("KEY-14")
def test_lfs_input_misses_on_every_edit(repo, tmp_path):
    workspace(
        repo,
        "*.bin filter=lfs diff=lfs merge=lfs -text\n",
        {"src/a.js": "A;\n", "src/logo.bin": "PNG1\n"},
    )
    repo.git("init", "-q", "-b", "main")
    _lfs(repo, tmp_path)
    repo.commit()
    logo = "packages/app/src/logo.bin"
    pointer = repo.git("show", f":{logo}")
    assert pointer.startswith("version https://git-lfs.github.com/spec/v1")
    assert built(repo) == "miss"
    assert built(repo) == "up-to-date"
    write_bytes(repo, logo, b"PNG2\n")
    assert built(repo) == "miss"
    write_bytes(repo, logo, b"PNG3\n")
    repo.git("add", "-A")
    assert built(repo) == "miss"
    repo.commit()
    assert built(repo) == "up-to-date"
    # The pointer itself in the worktree (a checkout that never smudged): added, it cleans to
    # itself, the blob the content had, and git calls it clean.
    write_bytes(repo, logo, repo.git("show", f":{logo}").encode())
    repo.git("add", "-A")
    assert repo.git("status", "--porcelain") == ""
    assert built(repo) == "miss"


@pytest.mark.feature("KEY-14")
def test_fake_lfs_is_what_git_runs(repo, tmp_path):
    """The stand-in is a clean filter git really runs: the index holds a pointer, not the bytes."""
    if shutil.which("git-lfs"):
        pytest.skip("real git-lfs installed")
    workspace(repo, "*.bin filter=lfs\n", {"src/logo.bin": "PNG1\n"})
    repo.git("init", "-q", "-b", "main")
    _lfs(repo, tmp_path)
    repo.commit()
    blob = repo.git("show", ":packages/app/src/logo.bin")
    digest = subprocess.run(
        ["sha256sum"], input=b"PNG1\n", capture_output=True, check=True
    ).stdout.split()[0]
    assert f"oid sha256:{digest.decode()}\nsize 5\n" in blob
