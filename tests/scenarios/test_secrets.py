"""EX-04: a task's secret values never reach anything vx writes — live output, the replayed and
cached logs, summaries, the cache's files — masked as `***`, also when a value arrives split
across two writes, and line by line for a multi-line value."""

from __future__ import annotations

import os

import pytest
from conftest import npm_workspace

TOKEN = "canary-tok-7f3a9c1e"
DECLARED = "hunter2-declared"
MULTI = "first-line-8d2e\nsecond-line-4b7f"
SHAPE = "not-a-secret-path-91c"


def _zstd_frames(blob: bytes) -> list[bytes]:
    """Every zstd frame found in `blob`, decompressed (artifacts, and logs kept compressed in rows)."""
    import zstandard

    out, start = [], blob.find(b"\x28\xb5\x2f\xfd")
    while start >= 0:
        try:
            out.append(zstandard.ZstdDecompressor().decompressobj().decompress(blob[start:]))
        except zstandard.ZstdError:
            pass
        start = blob.find(b"\x28\xb5\x2f\xfd", start + 1)
    return out


def _everything_written(*roots) -> list[tuple[str, bytes]]:
    found = []
    for root in roots:
        for directory, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(directory, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    blob = open(path, "rb").read()
                    found += [(path, blob)] + [
                        (path + " (zstd)", frame) for frame in _zstd_frames(blob)
                    ]
    return found


@pytest.mark.parametrize("sandboxed", [False, True], ids=["plain", "sandboxed"])
def test_ex04_no_secret_reaches_anything_vx_writes(repo, tmp_path, sandboxed):
    if sandboxed:
        import shutil

        if shutil.which("bwrap") is None:
            pytest.skip("bwrap is installed by dev/test")
    # Half of the token, then the rest, in two writes; the declared secret on stderr; the
    # multi-line value as it is; a _PATH variable that only looks like a secret.
    command = (
        'head=${MY_TOKEN%????????}; printf "%s" "$head"; printf "%s\\n" "${MY_TOKEN#$head}"; '
        'echo "db: $DB_PASS" >&2; printf "%s\\n" "$MULTI_SECRET"; echo "path: $TOKEN_PATH"; '
        "mkdir -p dist && echo built > dist/out.txt"
    )
    exec_ = {
        "command": command,
        "env": {
            "passThrough": ["MY_TOKEN", "MULTI_SECRET", "TOKEN_PATH", "DB_PASS"],
            "secret": ["DB_PASS"],
        },
    }  # DB_PASS: secret only because declared
    if sandboxed:
        exec_["sandbox"] = {"allow": {"write": ["dist/"]}}
    task = {
        "exec": exec_,
        "cache": {"inputs": {"files": ["src/**"]}, "outputs": {"files": ["dist/**"]}},
    }
    repo.write(
        npm_workspace({"app": {"tasks": {"build": task}, "files": {"src/a.js": "a"}}})
    ).commit()
    cache = tmp_path / "cache"
    env = {
        "MY_TOKEN": TOKEN,
        "MULTI_SECRET": MULTI,
        "TOKEN_PATH": SHAPE,
        "DB_PASS": DECLARED,
        "VX_CACHE_DIR": str(cache),
    }
    first = repo.vx("run", "build", cwd="packages/app", env=env)
    assert first.code == 0, first.out + first.err
    assert "***" in first.out and f"path: {SHAPE}" in first.out, first.out
    replay = repo.vx("run", "build", cwd="packages/app", env=env)
    assert replay.task("app#build")["cache"] != "miss" and "***" in replay.out, replay.out
    shown = [("vx output", (r.out + r.err).encode()) for r in (first, replay)]
    for where, blob in shown + _everything_written(repo.root / ".vx", cache):
        for secret in (TOKEN, DECLARED, *MULTI.splitlines()):
            assert secret.encode() not in blob, f"{secret!r} found in {where}"
    assert (
        repo.root / "packages/app/dist/out.txt"
    ).read_text() == "built\n"  # the task itself saw the values
