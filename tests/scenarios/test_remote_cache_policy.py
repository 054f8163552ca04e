"""Who decides what the remote layer does: `--cache` (CLI-27), remoteCache, the environment,
and the refusals that keep a token safe (LC-15, RC-13, reliability C.24)."""

import subprocess
import sys

import pytest
from support.remote_servers import CANARY, shop_files
from support.workspace import SRC


@pytest.mark.feature("CLI-27")
def test_cache_spec_is_checked_before_anything_runs(repo):
    repo.write(shop_files(None)).commit()
    for spec, needle in (
        ("--cache=", "needs a value"),
        ("--cache=local:x", "cannot read"),
        ("--cache=disk:rw", "cannot read"),
        ("--cache=local:r,local:w", "twice"),
    ):
        res = repo.vx("run", "build", "--all", spec)
        assert res.code == 2 and needle in res.err, (spec, res.err)
        assert not (repo.root / "packages/lib/dist").exists()


@pytest.mark.feature("CLI-27")
def test_naming_a_remote_that_is_not_configured_says_so_once(repo):
    repo.write(shop_files(None)).commit()
    res = repo.vx("run", "build", "--all", "--cache=local:rw,remote:rw")
    assert res.code == 0, res.err
    assert res.err.count("no remote cache is configured") == 1


@pytest.mark.feature("LC-15")
def test_local_read_only_reads_but_writes_nothing(repo):
    repo.write(shop_files(None)).commit()
    res = repo.vx("run", "build", "--all", "--cache=local:r")
    assert res.code == 0, res.err
    assert not list((repo.root / ".vx/cache").glob("*.tar.zst"))


def test_a_token_in_the_config_file_is_refused(repo):  # C.24
    repo.write(shop_files({"turbo": {"team": "t", "token": CANARY}})).commit()
    res = repo.vx("run", "build", "--all")
    assert res.code == 2
    assert "must not be written in a config file" in res.err and "TURBO_TOKEN" in res.err
    assert CANARY not in res.err


def test_unsafe_remote_settings_turn_the_layer_off_with_one_line(repo):  # C.18, C.24
    repo.write(shop_files({"turbo": {"team": "t", "signature": True}})).commit()
    cases = (
        (
            {"TURBO_API": "http://127.0.0.1:9", "TURBO_TOKEN": CANARY},
            "TURBO_REMOTE_CACHE_SIGNATURE_KEY is not set",
        ),
        (
            {
                "TURBO_API": "http://cache.example.invalid",
                "TURBO_TOKEN": CANARY,
                "TURBO_REMOTE_CACHE_SIGNATURE_KEY": "k",
            },
            "would travel in clear text",
        ),
    )
    for env, needle in cases:
        res = repo.vx("run", "build", "--all", "--force", env=env)
        assert res.code == 0, res.err
        assert res.err.count(needle) == 1, res.err
        assert CANARY not in res.out + res.err


def test_without_a_remote_nothing_of_it_is_imported(repo):
    repo.write(shop_files(None)).commit()
    probe = (
        "import sys, vx.cli.main; code = vx.cli.main.main(['run', 'build', '--all']); "
        "print(code, sorted(m for m in sys.modules if m.startswith(('vx.store.remote', 'vx.store.layered', "
        "'vx.store.ingest'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=repo.root,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC, "HOME": str(repo.root)},
    ).stdout
    assert out.strip().splitlines()[-1] == "0 []"
