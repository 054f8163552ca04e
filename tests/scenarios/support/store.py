"""A workspace's local cache store, as something able to write it could leave it."""

from __future__ import annotations

from pathlib import Path


def plant_artifact(cache: Path, index: str, key: str, members: dict[str, bytes]) -> None:
    """Replace the artifact of `key` in `cache` with one holding `members` (workspace-relative
    names, written as vx's packer writes them, sum and all) and make its row in the `index`
    database agree on the size: what anyone able to write the store, or upload with the team's
    token, could leave there."""
    import io
    import json
    import sqlite3

    from vx import CACHE_VERSION
    from vx.store.archive import LOG_ENTRY, META_ENTRY, OUTPUTS, encode_log
    from vx.store.packing import _TarWriter
    from vx.store.zstd import codec

    raw = io.BytesIO()
    with codec().ZstdCompressor(level=3).stream_writer(raw, closefd=False) as z:
        tar = _TarWriter(z)
        tar.add_bytes(LOG_ENTRY, encode_log([]))
        for name, body in members.items():
            tar.add_stream(OUTPUTS + name, io.BytesIO(body), len(body), 0o644, 0)
        meta = {"version": CACHE_VERSION, "key": key, "files": {n: [0o644, 0] for n in members}}
        tar.add_bytes(META_ENTRY, json.dumps(meta).encode())
        tar.finish()
    (cache / f"{key}.tar.zst").write_bytes(raw.getvalue())
    with sqlite3.connect(cache / index) as db:
        db.execute("UPDATE entries SET size_bytes=? WHERE hash=?", (len(raw.getvalue()), key))


def assert_saved_as_left(repo) -> None:
    """app's dist/ holds what the build's background writers left by the save (a.txt early,
    late.txt on SIGTERM), and a run after it is emptied restores exactly that from the store."""
    dist = repo.root / "packages/app/dist"
    on_disk = {p.name: p.read_text() for p in dist.iterdir()}
    assert on_disk == {"a.txt": "early\n", "late.txt": "late\n"}
    for p in dist.iterdir():
        p.unlink()
    again = repo.vx("run", "build", "--all")
    assert again.statuses()["app#build"] == ("success", "local")
    assert {p.name: p.read_text() for p in dist.iterdir()} == on_disk
