"""Which tracked files a clean filter could rewrite, and when the index still names their bytes.

The index OID of a tracked file is the hash of its *cleaned* blob. With no clean filter that is
the hash of the worktree bytes, which is what a key needs. With one it may not be: two different
worktree files can clean to one blob, and `git add` of either leaves the OID as it was.

- `text`, `eol`, `crlf` (and `core.autocrlf` where `text` is unspecified) turn CRLF into LF, and
  `ident` collapses `$Id: …$` into `$Id$`. Both only ever shrink a file. The index records the
  worktree size it last found clean; when that is the blob's exact size nothing was converted,
  and `git status` calls the file clean only while it is that size (a changed size is "modified"
  without a read, unless the recorded size is 0, git's "read me again", which is not trusted).
  So such a *converted* path keeps its index OID; another size (a CRLF copy of an LF blob) is
  hashed from disk. The listing does not show the recorded size, so a receipt stats these files.
- `filter` (Git LFS among them) and `working-tree-encoding` can map different bytes to one blob
  whatever their sizes (an LFS pointer left unsmudged cleans to itself, and so does the content
  it points to). Such a path is *filtered*: always hashed from disk.

Every other path keeps the fast path. The attributes come from one `git check-attr --stdin -z`,
the recorded sizes from one `git ls-files -s --debug`, the blob sizes from one `git cat-file
--batch-check`, and the verdicts are memoised beside the blob memo, keyed by the index file (its stat
and checksum) and by every attributes file's text and git's config.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import msgspec

from vx.dotvx import write_whole
from vx.files.blobs import blob_oid

ASKED = ("text", "eol", "crlf", "ident", "filter", "working-tree-encoding")


class Verdicts(msgspec.Struct):
    key: str = ""
    converted: dict[str, str] = {}  # path -> the identity judged: trusted while the listing agrees
    filtered: list[str] = []
    sizes: dict[str, int] = {}  # identity (mode prefix and OID) -> blob size


def judge(
    root: Path,
    trusted: dict[str, str],
    autocrlf: bool,
    stamp: str,
    facts: str,
    memo_path: Path | None,
) -> tuple[dict[str, str], frozenset[str]]:
    """The clean tracked files whose index OID still names their bytes, and which of them are
    converted (not vouched for by the listing alone: a receipt stats them). `stamp` names the
    index file (`vx.files.git.index_stamp`; without one nothing is memoised), `facts` the rest
    the verdicts depend on: the attributes files' texts and git's config. A converted path is
    trusted only with the OID it was judged with. When git cannot answer, nothing is trusted."""
    memo_path = memo_path if stamp else None
    memo = _load(memo_path)
    # The verdicts cover the files the listing called clean, and which those are moves without
    # the index file changing (a file edited back to its indexed size, under GIT_OPTIONAL_LOCKS=0
    # or a racy stamp): a memo judged for other files would leave one unjudged, and trusted.
    listed = "\0".join(f"{p}\0{i}" for p, i in sorted(trusted.items()))
    key = blob_oid(f"{stamp}\0{root}\0{facts}\0{listed}".encode("utf-8", "surrogateescape"))
    if memo.key != key:
        try:
            memo = _verdicts(root, trusted, autocrlf, memo, key)
        except OSError:
            return {}, frozenset()
        if memo_path is not None:
            _save(memo_path, memo)
    kept = dict(trusted)
    for path in memo.filtered:
        kept.pop(path, None)
    for path, named in memo.converted.items():
        if kept.get(path, named) != named:  # the index moved on since: hashed from disk
            del kept[path]
    return kept, frozenset(memo.converted)


def _verdicts(
    root: Path, trusted: dict[str, str], autocrlf: bool, old: Verdicts, key: str
) -> Verdicts:
    candidates = [p for p, i in trusted.items() if not i.startswith("120000:")]
    attrs = _check_attr(root, candidates)
    filtered: list[str] = []
    text: list[str] = []
    none: dict[str, str] = {}
    for path in candidates:
        got = attrs.get(path, none)  # only what is specified
        if got and (
            got.get("filter", "unset") != "unset"
            or got.get("working-tree-encoding", "unset") != "unset"
        ):
            filtered.append(path)
        elif any(got.get(a, "unset") != "unset" for a in ("text", "eol", "crlf", "ident")):
            text.append(path)
        elif autocrlf and "text" not in got and "crlf" not in got:
            text.append(path)
    recorded = _index_sizes(root) if text else {}
    known = old.sizes
    sizes = _blob_sizes(root, sorted({trusted[p] for p in text if trusted[p] not in known}))
    sizes.update((trusted[p], known[trusted[p]]) for p in text if trusted[p] in known)
    converted: dict[str, str] = {}
    for path in text:
        named = trusted[path]
        # The worktree size git recorded when it last found the file clean: the blob's exact size
        # means nothing was converted (both conversions only shrink). A size of 0 is git's mark
        # for "read me again"; one past 32 bits is recorded truncated.
        if (
            recorded.get(path) == (named.rpartition(":")[2], sizes.get(named))
            and sizes[named] < 1 << 32
        ):
            converted[path] = named
        else:
            filtered.append(path)
    return Verdicts(key, converted, sorted(filtered), sizes)


_DEBUG_RECORD = re.compile(r"\d{6} ([0-9a-f]+) 0\t([^\0]*)\0[^\0]*?  size: (\d+)\t")


def _index_sizes(root: Path) -> dict[str, tuple[str, int]]:
    """Each stage-0 entry's OID and the worktree size the index recorded for it."""
    out = _git(root, ["ls-files", "-s", "--debug", "-z"], b"")
    text = out.decode("utf-8", "surrogateescape")
    return {path: (oid, int(size)) for oid, path, size in _DEBUG_RECORD.findall(text)}


def _git(root: Path, args: list[str], stdin: bytes) -> bytes:
    proc = subprocess.run(["git", *args], cwd=root, input=stdin, capture_output=True)
    if proc.returncode != 0:
        raise OSError(proc.stderr.decode("utf-8", "replace").strip() or f"git {args[0]} failed")
    return proc.stdout


def _check_attr(root: Path, paths: list[str]) -> dict[str, dict[str, str]]:
    """Each path's clean-filter attributes that are specified (set, unset or a value), as git
    resolves them (macros included)."""
    if not paths:
        return {}
    data = "\0".join(paths).encode("utf-8", "surrogateescape") + b"\0"
    out = _git(root, ["check-attr", "--stdin", "-z", *ASKED], data)
    fields = out.decode("utf-8", "surrogateescape").split("\0")
    got: dict[str, dict[str, str]] = {}
    for i in range(2, len(fields), 3):
        if fields[i] != "unspecified":
            got.setdefault(fields[i - 2], {})[fields[i - 1]] = fields[i]
    return got


def _blob_sizes(root: Path, idents: list[str]) -> dict[str, int]:
    """The size of each blob named by an identity (mode prefix and OID); a missing one is left out."""
    if not idents:
        return {}
    oids = [i.rpartition(":")[2] for i in idents]
    out = _git(
        root,
        ["cat-file", "--buffer", "--batch-check=%(objectname) %(objectsize)"],
        "\n".join(oids).encode() + b"\n",
    )
    size_of = {}
    for line in out.decode().splitlines():
        oid, _, size = line.partition(" ")
        if size.isdigit():
            size_of[oid] = int(size)
    return {i: size_of[o] for i, o in zip(idents, oids) if o in size_of}


def _load(path: Path | None) -> Verdicts:
    if path is None:
        return Verdicts()
    try:
        with open(path, "rb") as f:
            return msgspec.json.decode(f.read(), type=Verdicts)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return Verdicts()


def _save(path: Path, verdicts: Verdicts) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(str(path), msgspec.json.encode(verdicts))
    except OSError:
        pass  # an optimisation: the next run judges again
