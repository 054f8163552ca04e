"""EX-04: a task's secret values never reach anything vx writes — live output, the replayed and
cached logs, summaries, the cache's files — masked as `***`, also when a value arrives split
across two writes, and line by line for a multi-line value."""

from __future__ import annotations

import os

import pytest
from support.workspace import npm_workspace

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


@pytest.mark.feature("EX-04")
@pytest.mark.parametrize("sandboxed", [False, True], ids=["plain", "sandboxed"])
def test_no_secret_reaches_anything_vx_writes(repo, tmp_path, sandboxed):
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


@pytest.mark.feature("EX-04")
def test_no_secret_reaches_the_remote_store_a_summary_a_profile_or_a_report(
    repo, tmp_path, turbo_server, team
):
    """The canary once more with everything that writes switched on: uploads to a real
    turborepo-remote-cache server (its storage is grepped), a summary, a profile and a report."""
    command = 'echo "token: $MY_TOKEN"; echo "quoted: \'$MY_TOKEN\'" >&2; mkdir -p dist && echo ok > dist/out.txt'
    task = {
        "exec": {"command": command, "env": {"passThrough": ["MY_TOKEN"]}},
        "cache": {"inputs": {"files": ["src/**"]}, "outputs": {"files": ["dist/**"]}},
    }
    repo.write(
        npm_workspace({"app": {"tasks": {"build": task}, "files": {"src/a.js": "a"}}})
    ).commit()
    cache, out = tmp_path / "cache", tmp_path / "out"
    out.mkdir()
    env = {**turbo_server.env(team), "MY_TOKEN": TOKEN, "VX_CACHE_DIR": str(cache)}
    run = repo.vx(
        "run",
        "build",
        "--cache=local:rw,remote:rw",
        f"--summarize={out / 'summary.json'}",
        f"--profile={out / 'profile.json'}",
        f"--report-file={out / 'report.md'}",
        env=env,
    )
    assert run.code == 0, run.out + run.err
    assert any(team in r for r in turbo_server.requests("PUT")), "nothing was uploaded"
    (repo.root / "packages/app/dist/out.txt").unlink()
    pulled = repo.vx(
        "run", "build", "--cache=remote:r", env={**env, "VX_CACHE_DIR": str(tmp_path / "empty")}
    )
    assert pulled.code == 0 and pulled.task("app#build")["cache"] == "remote", (
        pulled.err
    )  # its log replayed
    shown = [("vx output", (r.out + r.err).encode()) for r in (run, pulled)]
    for where, blob in shown + _everything_written(
        repo.root / ".vx", cache, tmp_path / "empty", out, turbo_server.storage
    ):
        assert TOKEN.encode() not in blob, f"the token was found in {where}"


HEADER = "hdr-canary-5e1b77"
PAT = "pat-canary-0c93d2"


@pytest.mark.feature("EX-04")
def test_a_remote_header_value_is_masked_whatever_the_header_is_called(repo, tmp_path):
    """Item: secret masking of REAPI headers. A header value for the remote
    (`VX_REAPI_HEADERS`) is a credential by nature, even under a name such as `authorization`
    that no secret pattern matches: a task that prints it (read from its own config, never
    given the variable) shows ***, live and replayed from the cache, and so does an error
    that quotes it."""
    (tmp_path / "creds.txt").write_text(f"auth: Bearer {HEADER}\nteam pat: {PAT}\n")
    task = {
        "exec": {"command": f"cat {tmp_path / 'creds.txt'}; mkdir -p dist && echo ok > dist/o"},
        "cache": {"inputs": {"files": ["src/**"]}, "outputs": {"files": ["dist/**"]}},
    }
    repo.write(
        npm_workspace({"app": {"tasks": {"build": task}, "files": {"src/a.js": "a"}}})
    ).commit()
    env = {"VX_REAPI_HEADERS": f"authorization=Bearer {HEADER},x-team-pat={PAT}"}
    first = repo.vx("run", "build", cwd="packages/app", env=env)
    assert first.code == 0, first.out + first.err
    assert "auth: ***" in first.out and "team pat: ***" in first.out, first.out
    again = repo.vx("run", "build", cwd="packages/app", env=env)
    assert again.task("app#build")["cache"] != "miss" and "team pat: ***" in again.out
    refused = repo.vx("run", f"app#{PAT}", env=env)  # an error that quotes the argument
    assert refused.code == 2 and "***" in refused.err, refused.err
    for result in (first, again, refused):
        assert HEADER not in result.out + result.err and PAT not in result.out + result.err
    for where, blob in _everything_written(repo.root / ".vx"):
        assert HEADER.encode() not in blob and PAT.encode() not in blob, where
