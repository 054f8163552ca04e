"""The input-file index against real git repos (KEY-04/05, KEY-12..17, KEY-21, KEY-23)."""

from __future__ import annotations

import builtins
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vx import witness
from vx.errors import VxError
from vx.files import blobs
from vx.files import index as files
from vx.files.globs import GlobSet
from vx.files.index import FileIndex, fingerprint
from vx.files.outputs import InputQuery, OutputSpec, walk_outputs, wipe_outputs

OLD = 1_600_000_000  # a past mtime: outside every racy window

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture(autouse=True)
def _git_identity(monkeypatch):
    for var in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(var, "vx test")
    for var in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(var, "vx@example.invalid")
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def write(
    root: Path, rel: str, text: str = "x\n", *, mode: int | None = None, old: bool = True
) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mode is not None:
        path.chmod(mode)
    if old:
        os.utime(path, (OLD, OLD))
    return path


def make_repo(root: Path, tree: dict[str, str], *, init_args: tuple[str, ...] = ()) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", *init_args)
    for rel, text in tree.items():
        write(root, rel, text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def hash_object(root: Path, rel: str) -> str:
    return git(root, "hash-object", "--no-filters", rel).strip()


def index_oid(root: Path, rel: str) -> str:
    return git(root, "ls-files", "-s", rel).split()[1]


def ids(inputs) -> dict[str, str]:
    return dict(inputs.files)


ALL = GlobSet(["**"])


@pytest.fixture
def repo(tmp_path) -> Path:
    return make_repo(
        tmp_path / "ws",
        {
            "package.json": '{"name":"root"}\n',
            "pkg/a/package.json": '{"name":"a"}\n',
            "pkg/a/src/index.ts": "export const a = 1\n",
            "pkg/a/src/util.ts": "export const u = 2\n",
            "pkg/b/package.json": '{"name":"b"}\n',
            "pkg/b/src/index.ts": "export const b = 1\n",
            "scripts/build.js": "console.log('build')\n",
        },
    )


# ---------------------------------------------------------------- KEY-12 identities


@pytest.mark.feature("KEY-12")
def test_clean_tracked_file_is_its_index_oid(repo):
    got = ids(FileIndex.load(repo).inputs("pkg/a", GlobSet(["src/**"])))
    assert got == {p: index_oid(repo, p) for p in ("pkg/a/src/index.ts", "pkg/a/src/util.ts")}


@pytest.mark.feature("KEY-12")
def test_clean_files_are_never_opened_or_stated(repo, monkeypatch):
    """The hot path: a warm key reads git's listing, not one source file."""
    touched: list[str] = []

    def spy(real):
        def wrapper(path, *args, **kwargs):
            if isinstance(path, (str, bytes, os.PathLike)) and "src" in os.fsdecode(path):
                touched.append(os.fsdecode(path))
            return real(path, *args, **kwargs)

        return wrapper

    for name in ("stat", "lstat", "open", "scandir", "readlink"):
        monkeypatch.setattr(os, name, spy(getattr(os, name)))
    monkeypatch.setattr(builtins, "open", spy(builtins.open))
    index = FileIndex.load(repo, repo / ".vx" / "memo.db")
    got = index.inputs("pkg/a", GlobSet(["src/**", "package.json"]))
    assert len(got.files) == 3 and touched == []
    assert not (repo / ".vx" / "memo.db").exists()  # nothing dirty: SQLite never touched
    write(repo, "pkg/a/src/util.ts", "dirty\n")  # the spy does see a file that must be read
    FileIndex.load(repo).inputs("pkg/a", GlobSet(["src/**"]))
    assert any(t.endswith("src/util.ts") for t in touched)


@pytest.mark.feature("KEY-12")
@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_clean_files_untouched_under_strace(repo):
    """Same proof from the kernel's side: vx's own process makes no syscall on a source file."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from pathlib import Path; from vx.files.index import FileIndex; from vx.files.globs import GlobSet;"
        "print(len(FileIndex.load(Path('.')).inputs('pkg/a', GlobSet(['src/**'])).files))"
    )
    src = str(Path(files.__file__).parents[2])  # src/, which holds vx/
    trace = repo.parent / "trace.txt"
    done = subprocess.run(
        [
            "strace",
            "-f",
            "-o",
            str(trace),
            "-e",
            "trace=openat,open,stat,lstat,newfstatat,statx,readlink",
            sys.executable,
            "-c",
            code,
            src,
        ],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0 and "ptrace" in done.stderr:
        pytest.skip("ptrace not permitted here")
    assert done.stdout.strip() == "2"
    lines = trace.read_text().splitlines()
    me = lines[0].split()[0]
    mine = [line for line in lines if line.split()[0] == me and "/src/" in line and ".ts" in line]
    assert mine == []


@pytest.mark.feature("KEY-12")
def test_dirty_and_untracked_hash_like_git(repo):
    write(repo, "pkg/a/src/index.ts", "export const a = 42\n")
    write(repo, "pkg/a/src/new.ts", "export const n = 0\n")
    got = ids(FileIndex.load(repo).inputs("pkg/a", GlobSet(["src/**"])))
    for rel in ("pkg/a/src/index.ts", "pkg/a/src/new.ts"):
        assert got[rel] == hash_object(repo, rel)
    assert got["pkg/a/src/index.ts"] != index_oid(repo, "pkg/a/src/index.ts")


@pytest.mark.feature("KEY-12")
def test_mode_prefixes(repo):
    write(repo, "pkg/a/bin/run.sh", "#!/bin/sh\n", mode=0o755)
    os.symlink("index.ts", repo / "pkg/a/src/link.ts")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "modes")
    write(repo, "pkg/a/bin/new.sh", "#!/bin/sh\necho\n", mode=0o755)
    os.symlink("util.ts", repo / "pkg/a/src/link2.ts")
    got = ids(FileIndex.load(repo).inputs("pkg/a", GlobSet(["bin", "src/link*"])))
    assert got["pkg/a/bin/run.sh"] == "100755:" + index_oid(repo, "pkg/a/bin/run.sh")
    # a link to a file: its own blob (the target's path), then the content it leads to (vx.files.links)
    assert got["pkg/a/src/link.ts"] == (
        "120000:"
        + index_oid(repo, "pkg/a/src/link.ts")
        + ">"
        + index_oid(repo, "pkg/a/src/index.ts")
    )
    assert got["pkg/a/bin/new.sh"] == "100755:" + hash_object(repo, "pkg/a/bin/new.sh")
    assert got["pkg/a/src/link2.ts"] == (
        "120000:" + blobs.blob_oid(b"util.ts") + ">" + index_oid(repo, "pkg/a/src/util.ts")
    )


@pytest.mark.feature("KEY-12")
def test_deleted_tracked_file_is_gone(repo):
    (repo / "pkg/a/src/util.ts").unlink()
    got = ids(FileIndex.load(repo).inputs("pkg/a", GlobSet(["src/**"])))
    assert list(got) == ["pkg/a/src/index.ts"]


@pytest.mark.feature("KEY-12")
def test_sha256_repo_hashes_with_sha256(tmp_path):
    repo = make_repo(tmp_path / "ws", {"a.txt": "a\n"}, init_args=("--object-format=sha256",))
    write(repo, "b.txt", "b\n")
    got = ids(FileIndex.load(repo).inputs("", ALL))
    assert got == {"a.txt": index_oid(repo, "a.txt"), "b.txt": hash_object(repo, "b.txt")}
    assert len(got["b.txt"]) == 64


@pytest.mark.feature("KEY-12")
def test_memo_spares_a_second_read(repo, monkeypatch):
    monkeypatch.setattr(
        witness, "RACY_NS", 0
    )  # the file's ctime is "now"; don't wait out the window
    write(repo, "pkg/a/src/new.ts", "n\n")
    memo = repo / ".vx" / "memo.db"
    first = FileIndex.load(repo, memo).inputs("pkg/a", GlobSet(["src/**"]))
    hashed: list[int] = []
    real = files.hash_open_file
    monkeypatch.setattr(
        files, "hash_open_file", lambda f, size, algo: hashed.append(size) or real(f, size, algo)
    )
    second = FileIndex.load(repo, memo).inputs("pkg/a", GlobSet(["src/**"]))
    assert second == first and hashed == []


@pytest.mark.feature("KEY-12")
def test_racy_file_is_not_memoised(repo, monkeypatch):
    # The window made wide: on a loaded machine more than 50 ms can pass between the write and the
    # hash, and the file is then rightly memoised; the rule is what is tested, not the clock.
    monkeypatch.setattr(witness, "RACY_NS", 3_600_000_000_000)
    write(repo, "pkg/a/src/new.ts", "n\n", old=False)
    memo = repo / ".vx" / "memo.db"
    FileIndex.load(repo, memo).inputs("pkg/a", GlobSet(["src/**"]))
    import sqlite3

    rows = sqlite3.connect(memo).execute("SELECT path FROM file_blob_memo").fetchall()
    assert ("pkg/a/src/new.ts",) not in rows


@pytest.mark.feature("KEY-12")
def test_memo_is_not_fooled_by_an_edit(repo, monkeypatch):
    monkeypatch.setattr(witness, "RACY_NS", 0)
    memo = repo / ".vx" / "memo.db"
    write(repo, "pkg/a/src/new.ts", "one\n")
    FileIndex.load(repo, memo).inputs("pkg/a", GlobSet(["src/**"]))
    path = write(repo, "pkg/a/src/new.ts", "two\n")
    os.utime(path, (OLD + 5, OLD + 5))
    got = ids(FileIndex.load(repo, memo).inputs("pkg/a", GlobSet(["src/**"])))
    assert got["pkg/a/src/new.ts"] == hash_object(repo, "pkg/a/src/new.ts")


# ---------------------------------------------------------------- KEY-14 trust


@pytest.mark.feature("KEY-14")
def test_assume_unchanged_and_skip_worktree_are_hashed_from_disk(repo):
    git(repo, "update-index", "--assume-unchanged", "pkg/a/src/index.ts")
    git(repo, "update-index", "--skip-worktree", "pkg/a/src/util.ts")
    write(repo, "pkg/a/src/index.ts", "changed behind git's back\n")
    write(repo, "pkg/a/src/util.ts", "also changed\n")
    got = ids(FileIndex.load(repo).inputs("pkg/a", GlobSet(["src/**"])))
    for rel in ("pkg/a/src/index.ts", "pkg/a/src/util.ts"):
        assert got[rel] == hash_object(repo, rel) != index_oid(repo, rel)


@pytest.mark.feature("KEY-14")
def test_conflicted_file_is_hashed_from_disk(repo):
    git(repo, "checkout", "-qb", "other")
    write(repo, "pkg/a/src/index.ts", "theirs\n")
    git(repo, "commit", "-qam", "theirs")
    git(repo, "checkout", "-q", "-")
    write(repo, "pkg/a/src/index.ts", "ours\n")
    git(repo, "commit", "-qam", "ours")
    subprocess.run(["git", "merge", "-q", "other"], cwd=repo, capture_output=True)
    got = ids(FileIndex.load(repo).inputs("pkg/a", GlobSet(["src/index.ts"])))
    assert got == {"pkg/a/src/index.ts": hash_object(repo, "pkg/a/src/index.ts")}


@pytest.mark.feature("KEY-14")
def test_eol_attribute_distrusts_the_index(tmp_path):
    """With `eol=crlf` the worktree bytes differ from the blob while git calls the file clean."""
    repo = make_repo(
        tmp_path / "ws", {".gitattributes": "*.txt text eol=crlf\n", "a.txt": "one\ntwo\n"}
    )
    (repo / "a.txt").unlink()
    git(repo, "checkout", "--", "a.txt")
    assert git(repo, "status", "--porcelain") == ""
    got = ids(FileIndex.load(repo).inputs("", GlobSet(["a.txt"])))
    assert got["a.txt"] == hash_object(repo, "a.txt") != index_oid(repo, "a.txt")


@pytest.mark.feature("KEY-14")
def test_harmless_attributes_keep_the_fast_path(tmp_path, monkeypatch):
    repo = make_repo(
        tmp_path / "ws",
        {".gitattributes": "*.png binary\n*.md -text linguist-documentation\n", "a.txt": "a\n"},
    )
    reads: list[str] = []
    real = os.lstat
    monkeypatch.setattr(
        os, "lstat", lambda p, *a, **k: reads.append(os.fsdecode(p)) or real(p, *a, **k)
    )
    got = ids(FileIndex.load(repo).inputs("", GlobSet(["a.txt"])))
    assert got == {"a.txt": index_oid(repo, "a.txt")}
    assert not any(r.endswith("a.txt") for r in reads)


def _spy_opens(monkeypatch) -> tuple[list[str], list[str]]:
    """(files opened, paths lstat'ed) from here on."""
    opened: list[str] = []
    stated: list[str] = []
    real_open, real_lstat = builtins.open, os.lstat
    monkeypatch.setattr(
        builtins,
        "open",
        lambda p, *a, **k: opened.append(os.fsdecode(p)) or real_open(p, *a, **k),
    )
    monkeypatch.setattr(
        os, "lstat", lambda p, *a, **k: stated.append(os.fsdecode(p)) or real_lstat(p, *a, **k)
    )
    return opened, stated


@pytest.mark.feature("KEY-14")
def test_text_auto_keeps_the_index_for_files_it_did_not_convert(tmp_path, monkeypatch):
    """`* text=auto` on LF files: the index OID, the file neither opened nor stat'ed (the index
    recorded the blob's size); a CRLF copy of the same blob, added so git calls it clean, is
    hashed."""
    repo = make_repo(
        tmp_path / "ws", {".gitattributes": "* text=auto\n", "a.txt": "a\n", "b.txt": "b\n"}
    )
    (repo / "b.txt").write_bytes(b"b\r\n")
    git(repo, "add", "b.txt")
    assert git(repo, "status", "--porcelain") == ""
    opened, stated = _spy_opens(monkeypatch)
    got = ids(FileIndex.load(repo, repo / ".vx" / "files.db").inputs("", GlobSet(["*.txt"])))
    assert got["a.txt"] == index_oid(repo, "a.txt") == hash_object(repo, "a.txt")
    assert got["b.txt"] == hash_object(repo, "b.txt") != index_oid(repo, "b.txt")
    assert not any(p.endswith("a.txt") for p in opened + stated)


@pytest.mark.feature("KEY-14")
def test_text_auto_above_a_workspace_in_a_subdirectory(tmp_path):
    """git is asked from the workspace root, whose paths are relative to it, not to the repo."""
    top = make_repo(
        tmp_path / "repo",
        {".gitattributes": "* text=auto\n", "ws/a.txt": "a\n", "ws/b.txt": "b\n"},
    )
    (top / "ws/b.txt").write_bytes(b"b\r\n")
    git(top, "add", "ws/b.txt")
    ws = top / "ws"
    index = FileIndex.load(ws, ws / ".vx" / "files.db")
    got = ids(index.inputs("", GlobSet(["*.txt"])))
    assert got == {"a.txt": index_oid(ws, "a.txt"), "b.txt": hash_object(ws, "b.txt")}
    assert got["b.txt"] != index_oid(ws, "b.txt")
    assert "a.txt" in index._l.converted and "a.txt" in index._l.trusted  # judged, kept


@pytest.mark.feature("KEY-14")
def test_filter_and_encoding_attributes_hash_from_disk(tmp_path):
    repo = make_repo(
        tmp_path / "ws",
        {
            ".gitattributes": "*.bin filter=lfs -text\n*.u16 working-tree-encoding=UTF-16\n",
            "a.bin": "pointer\n",
            "c.txt": "c\n",
        },
    )
    index = FileIndex.load(repo)
    assert not index.vouched("a.bin") and index.vouched("c.txt")
    assert ids(index.inputs("", GlobSet(["a.bin"]))) == {"a.bin": hash_object(repo, "a.bin")}


@pytest.mark.feature("KEY-14")
def test_attribute_verdicts_are_memoised_on_the_index(tmp_path, monkeypatch):
    """A second run with the same index and attributes asks git nothing more; an edited
    `.gitattributes` or a new index asks again."""
    from vx.files import attributes

    repo = make_repo(tmp_path / "ws", {".gitattributes": "*.txt text\n", "a.txt": "a\n"})
    asked: list[str] = []
    real = attributes._git
    monkeypatch.setattr(
        attributes, "_git", lambda root, args, data: asked.append(args[0]) or real(root, args, data)
    )
    memo = repo / ".vx" / "files.db"
    for _ in range(2):
        FileIndex.load(repo, memo)
    assert asked == ["check-attr", "ls-files", "cat-file"]
    write(repo, ".gitattributes", "*.txt text eol=lf\n")
    FileIndex.load(repo, memo)
    assert asked[3:] == ["check-attr", "ls-files"]  # the blob's size is known
    write(repo, "d.txt", "d\n")
    git(repo, "add", "d.txt")
    index = FileIndex.load(repo, memo)
    assert asked[5:] == ["check-attr", "ls-files", "cat-file"]
    assert ids(index.inputs("", GlobSet(["*.txt"]))) == {
        p: index_oid(repo, p) for p in ("a.txt", "d.txt")
    }


@pytest.mark.feature("KEY-14")
def test_autocrlf_distrusts_the_index(repo, monkeypatch):
    git(repo, "config", "core.autocrlf", "input")
    write(repo, "pkg/a/src/index.ts", "export const a = 1\r\n")
    got = ids(FileIndex.load(repo).inputs("pkg/a", GlobSet(["src/index.ts"])))
    assert got["pkg/a/src/index.ts"] == hash_object(repo, "pkg/a/src/index.ts")


# ---------------------------------------------------------------- KEY-17 exclusions


@pytest.mark.feature("KEY-17")
def test_gitignored_files_and_dirs_are_excluded(repo):
    write(repo, ".gitignore", "*.log\ndist/\n")
    write(repo, "pkg/a/debug.log", "log\n")
    write(repo, "pkg/a/dist/out.js", "out\n")
    got = ids(FileIndex.load(repo).inputs("pkg/a", ALL))
    assert set(got) == {"pkg/a/package.json", "pkg/a/src/index.ts", "pkg/a/src/util.ts"}


@pytest.mark.feature("KEY-17")
def test_untracked_node_modules_excluded_tracked_kept(repo):
    write(repo, "pkg/a/node_modules/tracked/index.js", "t\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "vendored")
    write(repo, "pkg/a/node_modules/dep/index.js", "d\n")
    got = ids(FileIndex.load(repo).inputs("pkg/a", GlobSet(["node_modules/**"])))
    assert list(got) == ["pkg/a/node_modules/tracked/index.js"]


@pytest.mark.feature("KEY-17")
def test_builtin_exclusions(repo):
    for rel in (
        "pkg/a/tsconfig.tsbuildinfo",
        "pkg/a/vx-lock.json",
        "pkg/a/app.bun-build",
        "pkg/a/.0123456789abcdef-01234567.tmp/x.js",
        "pkg/a/.vx/state",
        "pkg/a/keep.ts",
    ):
        write(repo, rel)
    got = ids(FileIndex.load(repo).inputs("pkg/a", ALL))
    assert "pkg/a/keep.ts" in got
    assert not any(
        k in p for p in got for k in ("tsbuildinfo", "vx-lock", "bun-build", ".tmp/", ".vx/")
    )


@pytest.mark.feature("KEY-17")
def test_nested_project_is_excluded(repo):
    got = ids(FileIndex.load(repo).inputs("", ALL, nested=["pkg/a", "pkg/b"]))
    assert set(got) == {"package.json", "scripts/build.js"}


@pytest.mark.feature("KEY-17")
def test_own_outputs_excluded_but_taken_back_output_stays(repo):
    write(repo, "pkg/a/dist/a.js")
    write(repo, "pkg/a/dist/keep.d.ts")
    got = ids(
        FileIndex.load(repo).inputs("pkg/a", ALL, excluded=GlobSet(["dist/**", "!dist/keep.d.ts"]))
    )
    assert "pkg/a/dist/keep.d.ts" in got and "pkg/a/dist/a.js" not in got


# ---------------------------------------------------------------- KEY-16 globs over the index


@pytest.mark.feature("KEY-16")
def test_globs_over_the_index(repo):
    write(repo, "pkg/a/pages/[id].tsx")
    write(repo, "pkg/a/pages/i.tsx")
    index = FileIndex.load(repo)
    sel = lambda *pats: sorted(ids(index.inputs("pkg/a", GlobSet(list(pats)))))
    assert sel("src") == ["pkg/a/src/index.ts", "pkg/a/src/util.ts"]  # literal = tree
    assert sel("src/**", "!src/util.ts") == ["pkg/a/src/index.ts"]
    assert sel("!src/util.ts", "src/**") == ["pkg/a/src/index.ts"]
    assert sel("{src,pages}/i*") == ["pkg/a/pages/i.tsx", "pkg/a/src/index.ts"]
    assert sel("pages/[id].tsx") == ["pkg/a/pages/[id].tsx"]
    assert sel("*.json") == ["pkg/a/package.json"]


@pytest.mark.feature("KEY-19")
def test_workspace_globs_are_root_relative(repo):
    got = ids(
        FileIndex.load(repo).inputs("pkg/a", GlobSet(["src/index.ts"]), GlobSet(["scripts/*.js"]))
    )
    assert set(got) == {"pkg/a/src/index.ts", "scripts/build.js"}


@pytest.mark.feature("KEY-23")
def test_unmatched_globs(repo):
    got = FileIndex.load(repo).inputs(
        "pkg/a", GlobSet(["src/**", "docs/**", "!src/x"]), GlobSet(["nope/*"])
    )
    assert got.unmatched_globs == ("docs/**", "nope/*")


@pytest.mark.feature("KEY-16")
def test_workspace_root_below_the_repo_root(tmp_path):
    repo = make_repo(
        tmp_path / "repo",
        {
            "README.md": "r\n",
            "apps/ws/package.json": "{}\n",
            "apps/ws/pkg/a/src/x.ts": "x\n",
            "apps/other/y.ts": "y\n",
        },
    )
    write(repo, "apps/ws/pkg/a/src/dirty.ts", "d\n")
    ws = repo / "apps" / "ws"
    index = FileIndex.load(ws)
    got = ids(index.inputs("", ALL))
    assert got == {
        "package.json": index_oid(repo, "apps/ws/package.json"),
        "pkg/a/src/x.ts": index_oid(repo, "apps/ws/pkg/a/src/x.ts"),
        "pkg/a/src/dirty.ts": hash_object(repo, "apps/ws/pkg/a/src/dirty.ts"),
    }
    assert index.identity("package.json") == index_oid(repo, "apps/ws/package.json")


@pytest.mark.feature("KEY-16")
def test_no_git_walk_gives_git_identities(repo, tmp_path):
    write(repo, "pkg/a/node_modules/dep/index.js")
    plain = tmp_path / "plain"
    shutil.copytree(repo, plain, ignore=shutil.ignore_patterns(".git"), symlinks=True)
    with_git = ids(FileIndex.load(repo).inputs("", ALL))
    without = FileIndex.load(plain)
    assert not without.git
    assert ids(without.inputs("", ALL)) == with_git


@pytest.mark.feature("KEY-16")
def test_workspace_inside_a_gitignored_dir_is_walked(tmp_path):
    """Git would call every file ignored (no inputs, so stale hits); hash the tree instead."""
    repo = make_repo(tmp_path / "repo", {".gitignore": "tmp/\n"})
    write(repo, "tmp/ws/src/a.ts", "a\n")
    index = FileIndex.load(repo / "tmp" / "ws")
    assert not index.git
    assert ids(index.inputs("", ALL)) == {"src/a.ts": blobs.blob_oid(b"a\n")}


@pytest.mark.feature("KEY-16")
def test_broken_repo_is_a_plain_refusal(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    with pytest.raises(VxError) as err:
        FileIndex.load(ws)
    assert "git" in err.value.message and err.value.hint


# ---------------------------------------------------------------- KEY-04 / KEY-05


@pytest.mark.feature("KEY-05")
def test_identity_of_package_json(repo):
    index = FileIndex.load(repo)
    assert index.identity("pkg/a/package.json") == index_oid(repo, "pkg/a/package.json")
    assert index.identity("pkg/zzz/package.json") == ""


@pytest.mark.feature("KEY-04")
def test_fingerprint_tracks_lockfiles(repo, monkeypatch):
    write(repo, "package-lock.json", "{}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "lock")
    reads: list[str] = []
    real = builtins.open
    monkeypatch.setattr(
        builtins, "open", lambda p, *a, **k: reads.append(str(p)) or real(p, *a, **k)
    )
    first = fingerprint(repo, FileIndex.load(repo))
    assert len(first) == 16 and not any("package-lock" in r for r in reads)
    assert fingerprint(repo, FileIndex.load(repo)) == first
    write(repo, "package-lock.json", '{"lockfileVersion": 3}\n')
    second = fingerprint(repo, FileIndex.load(repo))
    write(repo, ".npmrc", "save-exact=true\n")
    third = fingerprint(repo, FileIndex.load(repo))
    assert len({first, second, third}) == 3


@pytest.mark.feature("KEY-04")
def test_bun_patch_files_are_folded(repo):
    write(
        repo,
        "bun.lock",
        '{"lockfileVersion": 1, "patchedDependencies": {"left-pad@1.0.0": "patches/lp.patch"}}\n',
    )
    write(repo, "patches/lp.patch", "one\n")
    first = fingerprint(repo, FileIndex.load(repo))
    write(repo, "patches/lp.patch", "two\n")
    assert fingerprint(repo, FileIndex.load(repo)) != first


# ---------------------------------------------------------------- KEY-21


@pytest.fixture
def settled(monkeypatch):
    """The fixture's files were written a few ms before the load; don't count that as racy."""
    monkeypatch.setattr(witness, "RACY_NS", 0)


def _recheck(index, snap, project="pkg/a", globs=GlobSet(["src/**"])):
    return index.changed_since(snap, InputQuery(project, globs, None, None, ()), time.time_ns())


@pytest.mark.feature("KEY-21")
def test_clean_inputs_report_nothing(repo, settled):
    index = FileIndex.load(repo)
    snap = index.snapshot(index.inputs("pkg/a", GlobSet(["src/**"])))
    assert _recheck(index, snap) is None


@pytest.mark.feature("KEY-21")
def test_edit_during_the_run_is_caught(repo, settled):
    index = FileIndex.load(repo)
    snap = index.snapshot(index.inputs("pkg/a", GlobSet(["src/**"])))
    write(repo, "pkg/a/src/util.ts", "edited\n", old=False)
    assert _recheck(index, snap) == "pkg/a/src/util.ts"


@pytest.mark.feature("KEY-21")
def test_edit_with_mtime_forged_back_is_caught(repo, settled):
    index = FileIndex.load(repo)
    snap = index.snapshot(index.inputs("pkg/a", GlobSet(["src/**"])))
    write(repo, "pkg/a/src/util.ts", "same size?\n")  # utime'd back to OLD; ctime is now
    assert _recheck(index, snap) == "pkg/a/src/util.ts"


@pytest.mark.feature("KEY-21")
def test_edit_before_the_snapshot_is_caught(repo, settled):
    """Edited after git listed it but before the snapshot: the stat alone would look unchanged."""
    index = FileIndex.load(repo)
    inputs = index.inputs("pkg/a", GlobSet(["src/**"]))
    write(repo, "pkg/a/src/index.ts", "sneaky\n", old=False)
    snap = index.snapshot(inputs)
    assert _recheck(index, snap) == "pkg/a/src/index.ts"


@pytest.mark.feature("KEY-21")
def test_new_file_is_caught_but_not_a_new_ignored_one(repo, settled):
    write(repo, ".gitignore", "*.log\n")
    index = FileIndex.load(repo)
    snap = index.snapshot(index.inputs("pkg/a", GlobSet(["src/**"])))
    write(repo, "pkg/a/src/debug.log", "ignored\n")
    write(repo, "pkg/a/other/x.ts", "outside the globs\n")
    assert _recheck(index, snap) is None
    write(repo, "pkg/a/src/deep/new.ts", "new\n")
    assert _recheck(index, snap) == "pkg/a/src/deep/new.ts"


@pytest.mark.feature("KEY-21")
def test_deletion_is_caught(repo, settled):
    index = FileIndex.load(repo)
    snap = index.snapshot(index.inputs("pkg/a", GlobSet(["src/**"])))
    (repo / "pkg/a/src/index.ts").unlink()
    assert _recheck(index, snap) == "pkg/a/src/index.ts"


@pytest.mark.feature("KEY-21")
def test_file_written_just_before_the_run_is_rehashed_not_refused(repo):
    """Inside the racy window the stat cannot vouch for a file, so its bytes are asked: the same
    bytes the key used are unchanged, other bytes (a same-tick edit) are caught."""
    write(repo, "pkg/a/src/util.ts", "fresh\n", old=False)
    index = FileIndex.load(repo)
    snap = index.snapshot(index.inputs("pkg/a", GlobSet(["src/util.ts"])))
    assert _recheck(index, snap, globs=GlobSet(["src/util.ts"])) is None
    path = repo / "pkg/a/src/util.ts"
    st = path.stat()
    path.write_text("FRESH\n")  # same size; the stat put back as it was, but for ctime
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _recheck(index, snap, globs=GlobSet(["src/util.ts"])) == "pkg/a/src/util.ts"


@pytest.mark.feature("KEY-21")
def test_rewrite_with_the_same_bytes_is_unchanged(repo, settled):
    """A build that regenerates a tracked input with identical bytes (item 1) keeps its save."""
    index = FileIndex.load(repo)
    snap = index.snapshot(index.inputs("pkg/a", GlobSet(["src/**"])))
    path = repo / "pkg/a/src/util.ts"
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)  # new inode, mtime and ctime: every stat field moved
    assert _recheck(index, snap) is None


@pytest.mark.feature("KEY-21")
def test_extra_paths_are_checked_against_their_planned_identity(repo, settled):
    """EX-19: a lockfile is re-checked like an input, against the identity the fingerprint used."""
    write(repo, "package-lock.json", "{}\n")
    index = FileIndex.load(repo)
    assert index.identity("package-lock.json")  # planning read it
    snap = index.snapshot(None, ["package-lock.json", "yarn.lock"])
    assert index.changed_files(snap) is None
    write(repo, "package-lock.json", "{}\n", old=False)
    assert index.changed_files(snap) is None
    write(repo, "yarn.lock", "# new\n")
    assert index.changed_files(snap) == "yarn.lock"


@pytest.mark.feature("KEY-21")
def test_a_new_file_under_the_query_globs_is_a_change(repo, settled):
    query = InputQuery("pkg/a", GlobSet(["src/**"]), None, None, ())
    index = FileIndex.load(repo)
    snap = index.snapshot(index.inputs("pkg/a", query.globs))
    assert index.changed_since(snap, query, time.time_ns()) is None
    write(repo, "pkg/a/src/n.ts")
    assert index.changed_since(snap, query, time.time_ns()) == "pkg/a/src/n.ts"


# ---------------------------------------------------------------- outputs (LC-08)


@pytest.mark.feature("LC-08")
def test_walk_outputs_matches_only_declared_files(repo):
    for rel in (
        "pkg/a/dist/a.js",
        "pkg/a/dist/sub/b.js",
        "pkg/a/dist/c.map",
        "pkg/a/node_modules/x/y.js",
        "pkg/a/nested/dist/z.js",
    ):
        write(repo, rel)
    got = walk_outputs(repo, "pkg/a", GlobSet(["dist/**/*.js", "**/y.js"]), nested=["pkg/a/nested"])
    assert got == ["pkg/a/dist/a.js", "pkg/a/dist/sub/b.js"]
    assert walk_outputs(repo, "pkg/a", GlobSet(["node_modules/x"])) == ["pkg/a/node_modules/x/y.js"]
    assert walk_outputs(repo, "pkg/a", None, GlobSet(["pkg/a/dist/*.map"])) == ["pkg/a/dist/c.map"]


@pytest.mark.feature("LC-08")
def test_wipe_outputs_prunes_but_keeps_the_wildcard_root(repo):
    for rel in ("pkg/a/dist/a.js", "pkg/a/dist/sub/deep/b.js", "pkg/a/types/x.d.ts"):
        write(repo, rel)
    removed = wipe_outputs(repo, "pkg/a", GlobSet(["dist/**", "types"]))
    assert removed == ["pkg/a/dist/a.js", "pkg/a/dist/sub/deep/b.js", "pkg/a/types/x.d.ts"]
    assert (repo / "pkg/a/dist").is_dir() and not any((repo / "pkg/a/dist").iterdir())
    assert not (repo / "pkg/a/types").exists()
    assert (repo / "pkg/a/src/index.ts").exists()


@pytest.mark.feature("LC-08")
def test_wipe_never_follows_a_symlink_out_of_the_project(repo, tmp_path):
    outside = tmp_path / "outside"
    write(outside, "precious.js")
    os.symlink(outside, repo / "pkg/a/dist")
    os.symlink(outside / "precious.js", repo / "pkg/a/out.js")
    removed = wipe_outputs(repo, "pkg/a", GlobSet(["dist/**", "*.js"]))
    assert sorted(removed) == ["pkg/a/dist", "pkg/a/out.js"]
    assert (outside / "precious.js").read_text() == "x\n"
    assert not (repo / "pkg/a/dist").is_symlink()


@pytest.mark.feature("LC-08")
def test_wipe_never_touches_git_or_vx(repo):
    write(repo, ".vx/cache/x")
    removed = wipe_outputs(repo, "", GlobSet(["**/*", "!pkg", "!scripts", "!package.json"]))
    assert removed == [] and (repo / ".git" / "HEAD").exists() and (repo / ".vx/cache/x").exists()


@pytest.mark.feature("KEY-12")
def test_small_dirty_files_hash_without_openssl_and_like_git(tmp_path, monkeypatch):
    """The first few small files of a run hash with the interpreter's own sha1 (loading OpenSSL
    costs more than hashing them); past the budget, hashlib's. Both give git's blob ids."""
    monkeypatch.delitem(
        sys.modules, "hashlib", raising=False
    )  # as in a run that has not loaded it yet
    monkeypatch.setattr(blobs, "_builtin_left", 1000)
    small, big = tmp_path / "small", tmp_path / "big"
    small.write_bytes(b"a" * 600)
    big.write_bytes(os.urandom(5000))
    kinds = []
    for path in (
        small,
        big,
        small,
    ):  # within the budget, over it, and what is left of it is too little
        kinds.append(type(blobs._new_hash("sha1", path.stat().st_size)).__module__)
        git = subprocess.run(
            ["git", "hash-object", str(path)], capture_output=True, text=True
        ).stdout.strip()
        with open(path, "rb") as f:
            assert blobs.hash_open_file(f, path.stat().st_size, "sha1") == git
    assert kinds[0] == "_sha1" and kinds[1:] == ["_hashlib", "_hashlib"]


@pytest.mark.feature("LC-08")
def test_git_is_found_on_path_as_shutil_which_finds_it(tmp_path, monkeypatch):
    """The listing asks PATH for git without importing shutil; it answers as `shutil.which`."""
    bin_dir, not_exec, a_dir = tmp_path / "bin", tmp_path / "noexec", tmp_path / "dir"
    for d in (bin_dir, not_exec, a_dir / "git"):
        d.mkdir(parents=True)
    (bin_dir / "git").write_text("#!/bin/sh\n")
    (bin_dir / "git").chmod(0o755)
    (not_exec / "git").write_text("")
    for path in (f"{not_exec}:{a_dir}", f"{not_exec}:{a_dir}:{bin_dir}", ""):
        monkeypatch.setenv("PATH", path)
        assert files._on_path("git") == (shutil.which("git") is not None), path
    monkeypatch.chdir(bin_dir)  # an empty PATH finds nothing, not even in the current directory
    assert files._on_path("git") is False and shutil.which("git") is None


def stand_in_git(tmp_path, body: str) -> list[str]:
    """A git stand-in: a Python script that holds `index.lock` in tmp_path while it works."""
    script = tmp_path / "git"
    script.write_text(
        f"#!{sys.executable}\nimport os, signal, sys, time\nos.chdir({str(tmp_path)!r})\n"
        "signal.signal(signal.SIGTERM, lambda *a: (os.unlink('index.lock'), sys.exit(143)))\n"
        f"open('index.lock', 'w').close()\n{body}\n"
    )
    script.chmod(0o755)
    return [str(script)]


@pytest.mark.feature("LC-08")
def test_a_git_no_longer_needed_is_let_finish(tmp_path, monkeypatch):
    """A refused run reaps the listing's git by letting it finish, not by a signal that could land
    as git creates .git/index.lock (before its handler is in place) and leave the repo locked."""
    from vx.files import git as listing
    from vx.files.git import let_finish

    monkeypatch.setattr(listing, "GIT_FINISH_S", 120)  # a loaded machine's slow start is no stop

    proc = subprocess.Popen(
        stand_in_git(tmp_path, "time.sleep(0.3); os.unlink('index.lock')"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    let_finish(proc)
    assert proc.returncode == 0 and not (tmp_path / "index.lock").exists()


@pytest.mark.feature("LC-08")
def test_a_git_that_will_not_finish_is_stopped_with_a_signal_it_can_clean_up_after(
    tmp_path, monkeypatch
):
    from vx.files import git as listing

    monkeypatch.setattr(listing, "GIT_FINISH_S", 0.3)
    proc = subprocess.Popen(
        stand_in_git(tmp_path, "time.sleep(30)"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / "index.lock").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    listing.let_finish(proc)
    assert proc.returncode == 143 and not (tmp_path / "index.lock").exists()
    assert time.monotonic() - started < 20  # stopped, not the stand-in's 30 s sleep


# ---------------------------------------------------------------- the wipe spares this run's writes


def _spec(project: str = "pkg/c") -> OutputSpec:
    query = InputQuery(project, GlobSet(["src/**"]), None, None, ())
    return OutputSpec(project, ["out/**"], [], query)


def test_a_wipe_spares_what_changed_since_the_run_began(tmp_path):
    """A file written before the run goes; one another task wrote since the run began stays, and
    the spec says which; without a start everything goes, as a retry's wipe does."""
    old, new = tmp_path / "pkg/c/out/old.js", tmp_path / "pkg/c/out/sub/new.d.ts"
    write(tmp_path, "pkg/c/out/old.js")
    began = time.time_ns()
    # A file's ctime comes from a clock that lags by up to a tick: write until it is past `began`.
    while write(tmp_path, "pkg/c/out/sub/new.d.ts").stat().st_ctime_ns < began:
        pass
    spec = _spec()
    spec.wipe(tmp_path, spare_since_ns=began)
    assert not old.exists() and new.exists()
    assert spec.spared == ("pkg/c/out/sub/new.d.ts",)
    spec.wipe(tmp_path)
    assert not new.exists() and spec.spared == ()


def test_a_spared_wipe_keeps_tracked_files_and_wipes_older_ones(tmp_path):
    tracked = {"pkg/c/out/legacy.js"}
    query = InputQuery("pkg/c", GlobSet(["src/**"]), None, None, ())
    spec = OutputSpec("pkg/c", ["out/**"], [], query, tracked=tracked.__contains__)
    write(tmp_path, "pkg/c/out/legacy.js")
    write(tmp_path, "pkg/c/out/built.js")
    spec.wipe(tmp_path, spare_since_ns=time.time_ns() + 10**12)  # nothing is that new
    assert (tmp_path / "pkg/c/out/legacy.js").exists()
    assert not (tmp_path / "pkg/c/out/built.js").exists() and spec.spared == ()


def test_a_wipe_never_deletes_the_projects_package_json_tracked_or_not(tmp_path):
    """`"outputs": ["package.json", "dist/**"]` (a build that rewrites its manifest): the wipe
    takes dist/ and leaves package.json, even where git does not track it (no git at all here)."""
    query = InputQuery("pkg/c", GlobSet(["src/**"]), None, GlobSet(["package.json"]), ())
    spec = OutputSpec("pkg/c", ["package.json", "dist/**"], [], query)
    write(tmp_path, "pkg/c/package.json", '{"name":"c"}')
    write(tmp_path, "pkg/c/dist/index.js")
    spec.wipe(tmp_path)
    spec.wipe(tmp_path, spare_since_ns=time.time_ns() + 10**12)
    assert (tmp_path / "pkg/c/package.json").read_text() == '{"name":"c"}'
    assert not (tmp_path / "pkg/c/dist/index.js").exists()
    assert spec.allows("pkg/c/package.json")  # a restore writes it back


def test_links_below_a_linked_directory_are_followed_and_a_cycle_stops(tmp_path):
    """`app/lib -> shared`, `shared/more -> other` (followed through the alias), `other/back ->
    app` (back into a directory the chain holds: the link alone), `shared/out` leaving the
    workspace (refused where reached, through the alias too)."""
    from vx.files import links

    found = links.Links()
    found.dirs = {"app/lib": "shared", "shared/more": "other", "other/back": "app"}
    found.outside = {"shared/out": "/elsewhere"}
    paths = sorted(
        [
            "app/lib",
            "app/x.js",
            "other/back",
            "other/m.js",
            "shared/more",
            "shared/out",
            "shared/s.js",
        ]
    )

    def span(target: str) -> list[str]:
        return [p for p in paths if p.startswith(target + "/")]

    alias = links.aliases(found, paths, span)
    assert alias["app/lib/more/m.js"] == "other/m.js" and alias["app/lib/s.js"] == "shared/s.js"
    assert alias["app/lib/more/back"] == "other/back"  # the link itself, not followed again
    assert "app/lib/more/back/x.js" not in alias
    assert found.dirs["app/lib/more"] == "other"
    assert found.outside["app/lib/out"] == "/elsewhere"
