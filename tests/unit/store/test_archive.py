"""The artifact container: round trips, symlinked outputs, and every refusal (LC-04, LC-08, LC-09).

Real files, real zstd. Malicious archives are written by hand (tarfile is used to WRITE
only) with a correct `.vx-sum`, so each refusal is for the reason under test.
"""

from __future__ import annotations

import io
import json
import os
import random
import tarfile
import zlib
from pathlib import Path

import pytest
import zstandard

from vx import CACHE_VERSION
from vx.model import LogChunk, OutputFile
from vx.store import archive, unpacking
from vx.store.archive import ArchiveError
from vx.store.packing import pack
from vx.store.unpacking import check, unpack

ALL = lambda path: True  # noqa: E731 - the `allowed` predicate that admits every output


def write(
    root: Path, rel: str, data: bytes = b"x", mode: int | None = None, mtime_ms: int | None = None
) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mode is not None:
        os.chmod(path, mode)
    if mtime_ms is not None:
        os.utime(path, ns=(mtime_ms * 10**6, mtime_ms * 10**6))
    return path


def snapshot(root: Path) -> dict[str, object]:
    """Every path under root with its kind and bytes: what 'untouched' means."""
    seen: dict[str, object] = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            seen[rel] = (
                "link" if path.is_symlink() else "dir" if path.is_dir() else path.read_bytes()
            )
    return seen


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """An existing, empty restore root (a workspace root always exists)."""
    path = tmp_path / "out"
    path.mkdir()
    return path


def pack_ws(tmp_path: Path, ws: Path, rels: list[str], key: str = "k1", log=()) -> Path:
    dest = tmp_path / f"{key}.tar.zst"
    pack(dest, key=key, log=list(log), files=[(rel, ws / rel) for rel in rels])
    return dest


def packed_tar(tmp_path: Path, ws: Path, rels: list[str]) -> bytes:
    """The tar inside the zstd frame `pack` writes for `rels`."""
    return zstandard.ZstdDecompressor().stream_reader(pack_ws(tmp_path, ws, rels).open("rb")).read()


# ---------------------------------------------------------------- crafting


def _tar_entry(tar: tarfile.TarFile, name: str, body: bytes, **info_fields) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(body)
    for field, value in info_fields.items():
        setattr(info, field, value)
    tar.addfile(info, io.BytesIO(body) if info.isreg() else None)


def craft(
    entries,
    *,
    key: str = "k1",
    sum_value: str | None = None,
    after_sum=(),
    meta_files=None,
    meta_body: bytes | None = None,
) -> bytes:
    """A zstd tar of (name, body[, TarInfo fields]) plus meta and a correct sum unless told otherwise."""
    entries = list(entries)
    files = meta_files
    if files is None:
        files = {n[len("outputs/") :]: [0o644, 0] for n, *_ in entries if n.startswith("outputs/")}
    meta = (
        meta_body
        if meta_body is not None
        else json.dumps({"version": CACHE_VERSION, "key": key, "files": files}).encode()
    )
    entries.append((".vx-meta.json", meta))
    crc = 0
    for name, body, *_ in entries:
        crc = zlib.crc32(name.encode() + b"\0" + body, crc)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, body, *fields in entries:
            _tar_entry(tar, name, body, **(fields[0] if fields else {}))
        _tar_entry(tar, ".vx-sum", (sum_value or f"{crc:08x}").encode())
        for name, body in after_sum:
            _tar_entry(tar, name, body)
    return zstandard.ZstdCompressor().compress(buf.getvalue())


def open_under(top: Path) -> list[str]:
    """What this process holds open under `top` (the artifact, the root and its directories).
    Only those: a descriptor another thread or the garbage collector opens or closes meanwhile
    (a file an earlier test dropped) is not the unpacker's, and a whole-table comparison failed
    on one under load."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed since the listing (the listing's own descriptor among them)
            continue
        if target == str(top) or target.startswith(f"{top}/"):
            held.append(target)
    return sorted(held)


def refused(
    tmp_path: Path,
    blob: bytes,
    match: str,
    *,
    key: str = "k1",
    allowed=ALL,
    root: Path | None = None,
):
    """Unpack `blob` into a prepared root and assert it is refused with the root untouched."""
    root = root or tmp_path / "dest"
    root.mkdir(exist_ok=True)
    write(root, "keep/me.txt", b"before")
    before = snapshot(root)
    src = tmp_path / "crafted.tar.zst"
    src.write_bytes(blob)
    with pytest.raises(ArchiveError, match=match):
        unpack(src, key=key, allowed=allowed, root=root)
    assert snapshot(root) == before
    assert open_under(tmp_path) == []  # a refusal closes whatever it opened


# ---------------------------------------------------------------- round trips


@pytest.mark.feature("LC-09")
def test_round_trip_restores_bytes_modes_mtimes_and_log_order(tmp_path, out):
    ws = tmp_path / "ws"
    write(ws, "dist/a.js", b"console.log(1)\n", 0o644, 1_700_000_000_123)
    write(ws, "dist/bin/cli", b"#!/bin/sh\n", 0o755, 0)
    write(ws, "dist/secret", b"s", 0o000, -31_536_000_000)  # mode 000, 1969
    write(ws, "dist/future.txt", b"f", 0o600, 8_800_000_000_000)  # after 2242
    rels = ["dist/a.js", "dist/bin/cli", "dist/secret", "dist/future.txt"]
    log = [
        LogChunk(1, b"out 1\n"),
        LogChunk(2, b"err\n"),
        LogChunk(1, b""),
        LogChunk(1, b"out 2\n"),
    ]
    info = pack(tmp_path / "a.tar.zst", key="k1", log=log, files=[(r, ws / r) for r in rels])

    got = unpack(tmp_path / "a.tar.zst", key="k1", allowed=ALL, root=out)

    assert got.log == tuple(log)
    assert got.files == info.files
    assert info.size_bytes == (tmp_path / "a.tar.zst").stat().st_size
    for f in got.files:
        st = os.lstat(out / f.path)
        assert (out / f.path).read_bytes() == (ws / f.path).read_bytes()
        assert (st.st_mode & 0o777, st.st_mtime_ns // 10**6) == (f.mode, f.mtime_ms)
    assert {f.path: (f.mode, f.mtime_ms) for f in got.files}["dist/secret"] == (
        0o000,
        -31_536_000_000,
    )


def test_big_file_and_long_unicode_name_stream_through_pax(tmp_path, out):
    ws = tmp_path / "ws"
    big = os.urandom(3 * archive.CHUNK + 17)
    long_rel = "d" * 120 + "/é-" + "n" * 90 + ".txt"
    write(ws, "big.bin", big)
    write(ws, long_rel, b"long")
    unpack(pack_ws(tmp_path, ws, ["big.bin", long_rel]), key="k1", allowed=ALL, root=out)
    assert (out / "big.bin").read_bytes() == big
    assert (out / long_rel).read_bytes() == b"long"


def test_standard_tar_reads_our_archives(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "dist/a.js", b"a")
    raw = packed_tar(tmp_path, ws, ["dist/a.js"])
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        assert tar.getnames() == ["log", "outputs/dist/a.js", ".vx-meta.json", ".vx-sum"]


def test_meta_carries_version_key_files_and_extra(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "a.txt", b"a", 0o640, 5)
    dest = tmp_path / "m.tar.zst"
    pack(
        dest,
        key="kk",
        log=[],
        files=[("a.txt", ws / "a.txt")],
        meta={"exec": {"cpuMs": 1}, "key": "forged"},
    )
    raw = zstandard.ZstdDecompressor().stream_reader(dest.open("rb")).read()
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        meta = json.loads(tar.extractfile(".vx-meta.json").read())
    assert meta == {
        "version": CACHE_VERSION,
        "key": "kk",
        "files": {"a.txt": [0o640, 5]},
        "exec": {"cpuMs": 1},
    }


def test_restore_replaces_an_existing_file_and_a_symlink_at_the_output_path(tmp_path, out):
    ws = tmp_path / "ws"
    write(ws, "a.txt", b"new")
    write(ws, "b.txt", b"new b")
    write(out, "a.txt", b"old")
    (tmp_path / "elsewhere").write_bytes(b"untouched")
    os.symlink(tmp_path / "elsewhere", out / "b.txt")
    unpack(pack_ws(tmp_path, ws, ["a.txt", "b.txt"]), key="k1", allowed=ALL, root=out)
    assert (out / "a.txt").read_bytes() == b"new"
    assert not (out / "b.txt").is_symlink() and (out / "b.txt").read_bytes() == b"new b"
    assert (tmp_path / "elsewhere").read_bytes() == b"untouched"


# ---------------------------------------------------------------- symlinked outputs at save (LC-08)


@pytest.mark.feature("LC-08")
def test_symlinked_output_is_stored_as_its_target_bytes(tmp_path, out):
    ws = tmp_path / "ws"
    write(ws, "dist/real.js", b"real bytes", 0o755)
    os.symlink("real.js", ws / "dist/link.js")
    files = [("dist/link.js", ws / "dist/link.js"), ("dist/real.js", ws / "dist/real.js")]
    info = pack(tmp_path / "s.tar.zst", key="k1", log=[], files=files)
    assert [s[0] for s in info.stamps] == [
        "dist/real.js"
    ]  # a link never counts as a current output
    unpack(tmp_path / "s.tar.zst", key="k1", allowed=ALL, root=out)
    assert not (out / "dist/link.js").is_symlink()
    assert (out / "dist/link.js").read_bytes() == b"real bytes"
    assert os.lstat(out / "dist/link.js").st_mode & 0o777 == 0o755


@pytest.mark.feature("LC-08")
def test_a_symlinked_output_is_followed_only_to_another_output(
    tmp_path,
):  # sandbox escapes item 3
    ws = tmp_path / "ws"
    write(ws, "packages/other/secret.txt", b"secret")
    write(ws, "packages/app/src/a.js", b"a")
    (ws / "packages/app/dist").mkdir()
    for target in ("../../other/secret.txt", "../src/a.js"):
        (ws / "packages/app/dist/leak").unlink(missing_ok=True)
        os.symlink(target, ws / "packages/app/dist/leak")
        with pytest.raises(ArchiveError, match="which is not one of the task's outputs") as err:
            pack(
                tmp_path / "x.tar.zst",
                key="k1",
                log=[],
                files=[("packages/app/dist/leak", ws / "packages/app/dist/leak")],
            )
        assert "packages/app/dist/leak" in err.value.message


@pytest.mark.feature("LC-08")
@pytest.mark.parametrize(
    "make_link, match",
    [
        (lambda ws, tmp: os.symlink(ws / "somedir", ws / "out"), "symlink to a directory"),
        (lambda ws, tmp: os.symlink(ws / "missing", ws / "out"), "dangling symlink"),
        (lambda ws, tmp: os.symlink(tmp / "outside.txt", ws / "out"), "outside the workspace"),
    ],
    ids=["to-directory", "dangling", "outside-root"],
)
def test_refused_symlinked_outputs_name_the_path(tmp_path, make_link, match):
    ws = tmp_path / "ws"
    (ws / "somedir").mkdir(parents=True)
    (tmp_path / "outside.txt").write_bytes(b"o")
    make_link(ws, tmp_path)
    with pytest.raises(ArchiveError, match=match) as err:
        pack(tmp_path / "x.tar.zst", key="k1", log=[], files=[("out", ws / "out")])
    assert "out" in err.value.message


@pytest.mark.feature("LC-08")
def test_output_reached_through_a_parent_link_out_of_the_workspace_is_refused(tmp_path):
    ws, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    write(elsewhere, "a.js", b"a")
    ws.mkdir()
    os.symlink(elsewhere, ws / "dist")
    with pytest.raises(ArchiveError, match="outside the workspace"):
        pack(tmp_path / "x.tar.zst", key="k1", log=[], files=[("dist/a.js", ws / "dist/a.js")])


@pytest.mark.feature("LC-08")
def test_pack_refuses_unclean_names_it_could_never_restore(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "a\\b", b"x")
    with pytest.raises(ArchiveError, match="backslash"):
        pack(tmp_path / "x.tar.zst", key="k1", log=[], files=[("a\\b", ws / "a\\b")])


# ---------------------------------------------------------------- refusals (LC-09, LC-12)


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_dotdot_entry(tmp_path):
    refused(tmp_path, craft([("outputs/../evil.txt", b"e")]), r"`\.` or `\.\.`")
    assert not (tmp_path / "evil.txt").exists()


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_absolute_entry(tmp_path):
    refused(tmp_path, craft([("outputs//tmp/evil.txt", b"e")]), "absolute")


@pytest.mark.feature("LC-09", "LC-12")
@pytest.mark.parametrize("name", ["outputs/a\\b.txt", "outputs/a/./b.txt", "outputs/a//b.txt"])
def test_refuses_backslash_and_empty_components(tmp_path, name):
    refused(tmp_path, craft([(name, b"e")]), "refused entry name")


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_nul_in_a_pax_path(tmp_path):
    refused(
        tmp_path,
        craft(
            [("outputs/a.txt", b"a", {"pax_headers": {"path": "outputs/a\x00b"}})],
            meta_files={"a\x00b": [0o644, 0]},
        ),
        "NUL",
    )


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_names_the_task_does_not_own(tmp_path):
    blob = craft([("outputs/dist/a.js", b"a"), ("outputs/src/index.ts", b"evil")])
    refused(tmp_path, blob, "not a declared output", allowed=lambda p: p.startswith("dist/"))


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_a_symlinked_parent_directory_and_writes_nothing_through_it(tmp_path):
    root, outside = tmp_path / "dest", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(outside, root / "dist")
    refused(
        tmp_path,
        craft([("outputs/new/ok.txt", b"ok"), ("outputs/dist/a.js", b"evil")]),
        "is a symlink",
        root=root,
    )
    assert list(outside.iterdir()) == []
    assert not (root / "new").exists()  # the directory made for the first entry is gone again


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_a_wrong_key(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "a.txt")
    refused(
        tmp_path,
        pack_ws(tmp_path, ws, ["a.txt"], key="k1").read_bytes(),
        "records key 'k1'",
        key="k2",
    )


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_a_bad_sum(tmp_path):
    refused(tmp_path, craft([("outputs/a.txt", b"a")], sum_value="00000000"), "checksum mismatch")


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_a_missing_sum(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _tar_entry(tar, "outputs/a.txt", b"a")
    refused(
        tmp_path, zstandard.ZstdCompressor().compress(buf.getvalue()), "checksum entry is missing"
    )


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_a_flipped_body_byte(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "a.txt", b"A" * 5000)
    raw = packed_tar(tmp_path, ws, ["a.txt"])
    at = raw.index(b"A" * 100)
    tampered = raw[:at] + b"B" + raw[at + 1 :]
    refused(tmp_path, zstandard.ZstdCompressor().compress(tampered), "checksum mismatch")


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_a_truncated_file(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "a.bin", os.urandom(20_000))
    blob = pack_ws(tmp_path, ws, ["a.bin"]).read_bytes()
    for cut in (len(blob) - 1, len(blob) // 2, 10, 3):
        refused(tmp_path, blob[:cut], "truncated|not a zstd")


@pytest.mark.feature("LC-09", "LC-12")
def test_a_read_stopped_by_damage_leaves_nothing_for_the_next_artifact(tmp_path, out):
    """A thread keeps one decompressor for every artifact it reads: one refused mid-stream
    (a bad name after a big body, the rest of its frame never read) must leave nothing that
    the next artifact's restore reads."""
    big = os.urandom(300_000)
    refused(tmp_path, craft([("outputs/a.bin", big), ("outputs/../evil", b"x")]), r"\.\.")
    ws = tmp_path / "ws"
    second = b"second " * 40_000
    write(ws, "b.txt", second)
    unpack(pack_ws(tmp_path, ws, ["b.txt"], key="k2"), key="k2", allowed=ALL, root=out)
    assert (out / "b.txt").read_bytes() == second
    assert sorted(os.listdir(out)) == ["b.txt"]


@pytest.mark.feature("LC-09", "LC-12")
def test_an_artifact_too_big_to_read_whole_is_streamed_and_refused_alike(tmp_path, out):
    """Past WHOLE_READ the artifact is streamed from the file (the frame walked with `pread`)
    instead of read whole: the same bytes restore, and the same damage is refused."""
    from vx.store import unpacking

    ws = tmp_path / "ws"
    big = os.urandom(unpacking.WHOLE_READ + 4096)  # incompressible: the artifact is bigger still
    write(ws, "big.bin", big)
    blob = pack_ws(tmp_path, ws, ["big.bin"]).read_bytes()
    assert len(blob) > unpacking.WHOLE_READ
    for cut in (len(blob) - 1, len(blob) // 2):
        refused(tmp_path, blob[:cut], "truncated")
    refused(tmp_path, blob + b"garbage", "trailing data")
    src = tmp_path / "whole.tar.zst"
    src.write_bytes(blob)
    unpack(src, key="k1", allowed=ALL, root=out)
    assert (out / "big.bin").read_bytes() == big


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_trailing_garbage(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "a.txt")
    blob = pack_ws(tmp_path, ws, ["a.txt"]).read_bytes()
    refused(tmp_path, blob + b"garbage", "trailing data")
    refused(tmp_path, blob + zstandard.ZstdCompressor().compress(b"second frame"), "trailing data")


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_data_after_the_end_of_the_tar(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "a.txt")
    raw = packed_tar(tmp_path, ws, ["a.txt"])
    refused(
        tmp_path, zstandard.ZstdCompressor().compress(raw + b"\x01" + bytes(511)), "after the end"
    )


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_an_entry_after_the_sum(tmp_path):
    refused(
        tmp_path,
        craft([("outputs/a.txt", b"a")], after_sum=[("outputs/b.txt", b"b")]),
        "follows the checksum",
    )


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_an_oversize_entry_declared_by_a_crafted_pax_size(tmp_path):
    blob = craft([("outputs/a.txt", b"small", {"pax_headers": {"size": str(3 << 30)}})])
    refused(tmp_path, blob, "too large")


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_a_non_integer_pax_size(tmp_path):
    refused(
        tmp_path,
        craft([("outputs/a.txt", b"a", {"pax_headers": {"size": "12abc"}})]),
        "not a non-negative integer",
    )


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_a_pax_header_over_one_mib(tmp_path):
    long_path = "outputs/" + "a/" * (600 << 10) + "x"
    refused(tmp_path, craft([(long_path, b"a")], meta_files={}), "over 1 MiB")


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_past_the_decompressed_ceiling_while_streaming(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    write(ws, "zeros.bin", bytes(300_000))  # compresses to almost nothing: a small bomb
    blob = pack_ws(tmp_path, ws, ["zeros.bin"]).read_bytes()
    monkeypatch.setattr(unpacking, "MAX_UNPACKED", 200_000)
    refused(tmp_path, blob, "too large")


@pytest.mark.feature("LC-09", "LC-12")
@pytest.mark.parametrize(
    "fields",
    [
        {"type": tarfile.SYMTYPE, "linkname": "/etc/passwd"},
        {"type": tarfile.DIRTYPE},
        {"type": tarfile.LNKTYPE, "linkname": "x"},
    ],
    ids=["symlink", "directory", "hardlink"],
)
def test_refuses_non_regular_entries(tmp_path, fields):
    refused(tmp_path, craft([("outputs/a", b"", fields)], meta_files={}), "non-regular entry")


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_outputs_the_meta_does_not_record(tmp_path):
    refused(
        tmp_path,
        craft([("outputs/a.txt", b"a")], meta_files={"a.txt": [420, 0], "b.txt": [420, 0]}),
        "disagree",
    )


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_duplicate_and_unknown_entries(tmp_path):
    refused(tmp_path, craft([("outputs/a.txt", b"a"), ("outputs/a.txt", b"b")]), "duplicate")
    refused(tmp_path, craft([("stdout", b"a")]), "unexpected entry")


@pytest.mark.feature("LC-09", "LC-12")
@pytest.mark.parametrize(
    "body",
    [
        b'{"version": 1',
        b'{"files": {}} {"files": {}}',
        b"\xef\xbb\xbf{}",
        b"\xff\xfe{}",
        b"[" * 100_000,
        b'{"files": {"a": "\x01"}}',
        b"",
    ],
    ids=[
        "cut",
        "two values",
        "utf-8 bom",
        "not utf-8",
        "nested past the stack",
        "control char",
        "empty",
    ],
)
def test_refuses_meta_that_is_not_one_json_value(tmp_path, body):
    """Whatever json.loads refuses, the reader refuses as a damaged artifact — nesting too deep
    for the parser's stack included — and leaves the workspace as it was."""
    refused(tmp_path, craft([("outputs/a.txt", b"a")], meta_body=body), "not JSON")


@pytest.mark.feature("LC-09", "LC-12")
def test_meta_is_read_as_json_loads_reads_it(tmp_path, out):
    """Whitespace around the value, escapes and every JSON type parse as `json.loads` parses them."""
    meta = {
        "version": CACHE_VERSION,
        "key": "k1",
        "files": {"a.txt": [0o640, 5]},
        "exec": {"cpuMs": 1.5e2, "note": "\u00e9\n", "none": None, "ok": True, "list": [-1, 0.0]},
    }
    body = b" \n\t" + json.dumps(meta, indent=2).encode() + b"\r\n "
    src = tmp_path / "m.tar.zst"
    src.write_bytes(craft([("outputs/a.txt", b"a")], meta_body=body))
    checked = check(src, key="k1", allowed=ALL)
    assert dict(checked.meta) == json.loads(body)
    assert [
        (f.path, f.mode, f.mtime_ms) for f in unpack(src, key="k1", allowed=ALL, root=out).files
    ] == [("a.txt", 0o640, 5)]


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_bad_mode_in_meta(tmp_path):
    refused(
        tmp_path,
        craft([("outputs/a.txt", b"a")], meta_files={"a.txt": ["644", 0]}),
        "bad mode/mtime",
    )


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_a_directory_in_the_way(tmp_path):
    root = tmp_path / "dest"
    (root / "a.txt").mkdir(parents=True)
    refused(tmp_path, craft([("outputs/a.txt", b"a")]), "directory is in the way", root=root)


# ---------------------------------------------------------------- log framing


def test_log_framing_round_trips_and_rejects_garbage():
    log = (LogChunk(2, b"e" * 70_000), LogChunk(1, b""), LogChunk(1, b"\x00\xff"))
    assert archive.decode_log(archive.encode_log(log)) == log
    with pytest.raises(ArchiveError, match="malformed log"):
        archive.decode_log(b"\x03\x00\x00\x00\x01x")
    with pytest.raises(ArchiveError, match="malformed log"):
        archive.decode_log(b"\x01\x00\x00")


def test_output_file_record_is_what_meta_says(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "a.txt", b"abc", 0o640, 1234)
    info = pack(tmp_path / "i.tar.zst", key="k", log=[], files=[("a.txt", ws / "a.txt")])
    assert info.files == (OutputFile("a.txt", 3, 0o640, 1234),)
    assert len(info.crc) == 8 and int(info.crc, 16) >= 0


def test_the_codec_is_loaded_once_however_many_threads_ask_first():
    """Restores run on threads. Were two first uses to load the extension twice, an extension with
    multi-phase init would give two modules — two ZstdErrors, one thread's errors uncaught by
    another's handler. Loading is stood in by one that makes a new module each time, slowly."""
    code = (
        "import sys, threading, time, types\n"
        "from vx.store import zstd\n"
        "def fresh():\n"
        "    time.sleep(0.05)\n"
        "    sys.modules[zstd.EXTENSION] = module = types.ModuleType(zstd.EXTENSION)\n"
        "    return module\n"
        "zstd._load_extension = fresh\n"
        "got, go = [], threading.Barrier(8)\n"
        "def first():\n"
        "    go.wait(); got.append(zstd.codec())\n"
        "threads = [threading.Thread(target=first) for _ in range(8)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print(len({id(m) for m in got}))\n"
    )
    import subprocess
    import sys

    src = str(
        Path(__file__).resolve().parents[3] / "src"
    )  # this checkout's vx, not an installed one
    env = {**os.environ, "PYTHONPATH": src}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.stdout.strip() == "1", proc.stderr


def test_an_artifact_with_more_directories_than_stay_open_restores_whole(tmp_path):
    """Item 2's descriptors: past `Dirs.LIMIT` open directories they are closed and reopened by
    the same checked walk; every file lands, with its mode, and no descriptor is left open."""
    ws = tmp_path / "ws"
    rels = [f"dist/g{i % 7}/d{i}/f.js" for i in range(3 * unpacking.Dirs.LIMIT)]
    for i, rel in enumerate(rels):
        write(ws, rel, str(i).encode(), 0o755 if i % 2 else 0o644, 1_700_000_000_000 + i)
    src = pack_ws(tmp_path, ws, rels)
    dest = tmp_path / "dest"
    dest.mkdir()
    unpack(src, key="k1", allowed=ALL, root=dest)
    assert open_under(tmp_path) == []
    assert snapshot(dest) == snapshot(ws)


@pytest.mark.feature("LC-09", "LC-12")
def test_refuses_a_header_whose_checksum_field_is_off_by_one(tmp_path):
    ws = tmp_path / "ws"
    write(ws, "a.txt", b"A" * 50)
    raw = packed_tar(tmp_path, ws, ["a.txt"])
    stored = int(raw[148:156].rstrip(b"\0 "), 8)
    field = b"%06o\0 " % (stored + 1)
    tampered = raw[:148] + field + raw[156:]
    refused(tmp_path, zstandard.ZstdCompressor().compress(tampered), "header checksum mismatch")


def test_the_header_sum_is_the_byte_sum_with_the_field_as_spaces():
    """`_header_sum` adds in C what `sum()` added per byte: the same number for any header,
    the largest (every byte 0xFF, where Adler-32 would wrap past 256 bytes) included."""
    rng = random.Random(26)
    blocks = [bytes(512), b"\xff" * 512, b"\x80" * 512]
    blocks += [bytes(rng.randrange(256) for _ in range(512)) for _ in range(200)]
    for block in blocks:
        assert unpacking._header_sum(block) == sum(block[:148]) + 8 * 0x20 + sum(block[156:])
