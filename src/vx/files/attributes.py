"""Which tracked files a clean filter could rewrite, and when the index still names their bytes.

The index OID of a tracked file is the hash of its *cleaned* blob. With no clean filter that is
the hash of the worktree bytes, which is what a key needs. With one it may not be, and `git
status` calls a file clean when its cleaned bytes match, so two different worktree files can
share one OID:

- `text`, `eol`, `crlf` (and `core.autocrlf` where `text` is unspecified) turn CRLF into LF, and
  `ident` collapses `$Id: …$` into `$Id$`. Both only ever shrink a file, so a worktree file of
  the blob's exact size was not converted: its bytes are the blob, and the index OID is theirs.
  Such a path is *converted*: trusted while an lstat finds it the blob's size, hashed from disk
  otherwise (a CRLF copy of an LF blob, say).
- `filter` (Git LFS among them) and `working-tree-encoding` can map different bytes to one blob
  whatever their sizes (an LFS pointer left unsmudged cleans to itself, and so does the content
  it points to). Such a path is *filtered*: always hashed from disk.

Every other path keeps the fast path. The attributes come from one `git check-attr --stdin -z`,
the blob sizes from one `git cat-file --batch-check`, and both are memoised beside the blob memo,
keyed by the index file as it was before git listed it and by every attributes file's text.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import msgspec

from vx.dotvx import write_whole
from vx.files.blobs import blob_oid

ASKED = ("text", "eol", "crlf", "ident", "filter", "working-tree-encoding")
_OFF = ("unspecified", "unset")


class Verdicts(msgspec.Struct):
    key: str = ""
    converted: dict[str, tuple[str, int]] = {}  # path -> (identity, blob size)
    filtered: list[str] = []


def judge(
    root: Path,
    trusted: dict[str, str],
    autocrlf: bool,
    stamp: str,
    facts: str,
    memo_path: Path | None,
) -> tuple[dict[str, str], dict[str, tuple[str, int]]]:
    """Split the clean tracked files git vouches for into those it still vouches for, and the
    converted ones (identity, blob size); a filtered path leaves both. `stamp` is the index as it
    was before git listed it (`vx.files.git.index_stamp`: without one nothing is memoised), `facts` the rest
    the verdicts depend on: the attributes files' texts and git's config. When git cannot answer,
    nothing is trusted."""
    memo_path = memo_path if stamp else None
    memo = _load(memo_path)
    key = blob_oid(f"{stamp}\0{root}\0{facts}".encode("utf-8", "surrogateescape"))
    if memo.key != key:
        try:
            memo = _verdicts(root, trusted, autocrlf, memo, key)
        except OSError:
            return {}, {}
        if memo_path is not None:
            _save(memo_path, memo)
    plain = dict(trusted)
    for path in memo.filtered:
        plain.pop(path, None)
    converted: dict[str, tuple[str, int]] = {}
    for path, (ident, size) in memo.converted.items():
        if plain.pop(path, None) == ident:
            converted[path] = (ident, size)
    return plain, converted


def _verdicts(
    root: Path, trusted: dict[str, str], autocrlf: bool, old: Verdicts, key: str
) -> Verdicts:
    attrs = _check_attr(root, [p for p, i in trusted.items() if not i.startswith("120000:")])
    filtered: list[str] = []
    text: list[str] = []
    for path, got in attrs.items():
        if (
            got.get("filter", "unset") not in _OFF
            or got.get("working-tree-encoding", "unset") not in _OFF
        ):
            filtered.append(path)
        elif (
            any(got.get(a, "unset") not in _OFF for a in ("text", "eol", "crlf", "ident"))
            or autocrlf
            and got.get("text") == "unspecified"
            and got.get("crlf") == "unspecified"
        ):
            text.append(path)
    known = {ident: size for ident, size in old.converted.values()}
    sizes = _blob_sizes(root, sorted({trusted[p] for p in text if trusted[p] not in known}))
    sizes.update(known)
    converted = {p: (trusted[p], sizes[trusted[p]]) for p in text if trusted[p] in sizes}
    filtered += [p for p in text if trusted[p] not in sizes]  # no size: hashed from disk
    return Verdicts(key, converted, sorted(filtered))


def _git(root: Path, args: list[str], stdin: bytes) -> bytes:
    proc = subprocess.run(["git", *args], cwd=root, input=stdin, capture_output=True)
    if proc.returncode != 0:
        raise OSError(proc.stderr.decode("utf-8", "replace").strip() or f"git {args[0]} failed")
    return proc.stdout


def _check_attr(root: Path, paths: list[str]) -> dict[str, dict[str, str]]:
    """Each path's clean-filter attributes, as git resolves them (macros included)."""
    if not paths:
        return {}
    data = "\0".join(paths).encode("utf-8", "surrogateescape") + b"\0"
    out = _git(root, ["check-attr", "--stdin", "-z", *ASKED], data)
    fields = out.decode("utf-8", "surrogateescape").split("\0")
    got: dict[str, dict[str, str]] = {}
    for i in range(0, len(fields) - 2, 3):
        got.setdefault(fields[i], {})[fields[i + 1]] = fields[i + 2]
    return got


def _blob_sizes(root: Path, idents: list[str]) -> dict[str, int]:
    """The size of each blob named by an identity (mode prefix and OID); a missing one is left out."""
    if not idents:
        return {}
    oids = [i.rpartition(":")[2] for i in idents]
    out = _git(
        root,
        ["cat-file", "--batch-check=%(objectname) %(objectsize)"],
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
