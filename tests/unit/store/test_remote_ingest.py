"""A downloaded artifact is proven before it enters the local store (RC-05)."""

import io
import json
import tarfile

import pytest
import zstandard

from vx import CACHE_VERSION
from vx.model import LogChunk
from vx.store import packing, unpacking
from vx.store.ingest import file_dir_clash, ingest
from vx.store.remote import REJECTED, RemoteFailure

KEY = "0123456789abcdef"


def packed(tmp_path, files=None, key=KEY):
    files = files or {"packages/a/dist/out.js": "A;"}
    root = tmp_path / "ws"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    dest = tmp_path / "artifact.tar.zst"
    packing.pack(dest, key=key, log=[LogChunk(1, b"built\n")], files=[(r, root / r) for r in files])
    return dest


def in_dist(path):
    return path.startswith("packages/a/dist/")


def _entries(names, key=KEY):
    meta = {
        "key": key,
        "version": CACHE_VERSION,
        "files": {n[len("outputs/") :]: [420, 0] for n in names},
    }
    return [("log", b""), *((n, b"x") for n in names), (".vx-meta.json", json.dumps(meta).encode())]


def _zstd_ustar(path, entries):
    """Write `entries` as a ustar by tarfile (not vx's writer), compressed as one zstd frame."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(zstandard.ZstdCompressor().compress(raw.getvalue()))
    return path


def handmade(tmp_path, names, key=KEY):
    """A zstd ustar built by tarfile, not by vx: hostile shapes vx's own writer refuses to make."""
    return _zstd_ustar(tmp_path / "hand.tar.zst", _entries(names, key))


def rejected(path, key=KEY, allowed=in_dist) -> str:
    with pytest.raises(RemoteFailure) as info:
        ingest(path, key=key, allowed=allowed)
    assert info.value.kind == REJECTED
    return info.value.detail


def test_a_sound_artifact_is_accepted_with_its_outputs_log_and_sum(tmp_path):
    checked = ingest(packed(tmp_path), key=KEY, allowed=in_dist)
    assert [f.path for f in checked.files] == ["packages/a/dist/out.js"]
    assert checked.log == (LogChunk(1, b"built\n"),) and len(checked.crc) == 8


def test_another_key_is_refused(tmp_path):
    assert "records key" in rejected(packed(tmp_path), key="fedcba9876543210")


def test_an_output_outside_the_declared_outputs_is_refused(tmp_path):
    path = packed(tmp_path, {"packages/a/dist/out.js": "A", "packages/a/src/index.js": "evil"})
    assert "not a declared output" in rejected(path)


@pytest.mark.parametrize(
    "name", ["outputs/../x", "outputs/packages/a/dist/../../../../x", "outputs//etc/passwd"]
)
def test_escaping_names_are_refused(tmp_path, name):
    assert "refused entry name" in rejected(handmade(tmp_path, [name]), allowed=lambda p: True)


def test_a_path_both_file_and_directory_is_refused(tmp_path):
    names = ["outputs/packages/a/dist/x", "outputs/packages/a/dist/x/y"]
    assert "both a file and a directory" in rejected(handmade_with_sum(tmp_path, names))
    assert file_dir_clash(["a/b", "a/b/c"]) == "a/b" and file_dir_clash(["a/b", "a/bc"]) is None


def handmade_with_sum(tmp_path, names):
    """Like `handmade` but with a correct `.vx-sum`, so only the shape is wrong."""
    import zlib

    entries = _entries(names)
    crc = 0
    for name, data in entries:
        crc = zlib.crc32(data, zlib.crc32(name.encode() + b"\0", crc))
    return _zstd_ustar(tmp_path / "sum.tar.zst", [*entries, (".vx-sum", f"{crc:08x}".encode())])


def test_a_flipped_bit_fails_the_sum_or_the_frame(tmp_path):
    path = packed(tmp_path)
    body = bytearray(path.read_bytes())
    body[len(body) // 2] ^= 0x10
    path.write_bytes(bytes(body))
    rejected(path)


def test_a_decompression_bomb_stops_at_the_ceiling(tmp_path, monkeypatch):
    path = packed(tmp_path, {"packages/a/dist/big.bin": "\0" * (4 << 20)})
    assert path.stat().st_size < 4096  # tiny on the wire
    monkeypatch.setattr(unpacking, "MAX_UNPACKED", 1 << 20)
    assert "ceiling" in rejected(path)


def test_ingest_writes_nothing(tmp_path):
    path = packed(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    ingest(path, key=KEY, allowed=in_dist)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
