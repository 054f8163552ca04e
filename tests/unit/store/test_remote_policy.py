"""The four cache axes (LC-15) and `--cache` (CLI-27), resolved without any I/O."""

import pytest

from vx.errors import UsageError
from vx.model import RemoteCacheConfig
from vx.store.policy import CacheAxes, parse_spec, plan_cache

TURBO = RemoteCacheConfig(kind="turbo", url="http://127.0.0.1:1", team="t")


def plan(spec=None, cfg=TURBO, env=None, **flags):
    return plan_cache(
        no_cache=flags.get("no_cache", False),
        force=flags.get("force", False),
        spec=spec,
        cfg=cfg,
        env=env or {},
    )


def test_spec_sets_each_named_layer_exactly():
    assert parse_spec("local:rw,remote:r") == {"local": (True, True), "remote": (True, False)}
    assert parse_spec("remote:") == {"remote": (False, False)}
    assert parse_spec(" local:w ") == {"local": (False, True)}


@pytest.mark.parametrize(
    "bad", ["", " ", "local", "local:x", "cloud:rw", "local:rr", "local:r,local:w", "local:rw,"]
)
def test_bad_specs_are_refused(bad):
    with pytest.raises(UsageError):
        parse_spec(bad)


def test_without_a_remote_only_the_local_axes_exist():
    got = plan(cfg=None)
    assert (
        got.axes == CacheAxes(True, True, False, False) and got.remote is None and got.notices == ()
    )


def test_remote_reads_everywhere_and_writes_on_ci_by_default():
    assert plan().axes == CacheAxes(True, True, True, False)
    assert plan(env={"CI": "true"}).axes == CacheAxes(True, True, True, True)
    assert plan(env={"CI": "0"}).axes == CacheAxes(True, True, True, False)


def test_upload_mode_overrides_the_ci_default():
    always = RemoteCacheConfig(kind="turbo", url="http://127.0.0.1:1", upload="always")
    never = RemoteCacheConfig(kind="turbo", url="http://127.0.0.1:1", upload="never")
    assert plan(cfg=always).axes.remote_write
    assert not plan(cfg=never, env={"CI": "1"}).axes.remote_write
    assert plan(cfg=never, spec="remote:rw").axes.remote_write  # the flag names it exactly


def test_force_turns_reads_off_and_no_cache_everything():
    assert plan(force=True, spec="remote:rw").axes == CacheAxes(False, True, False, True)
    got = plan(no_cache=True, spec="remote:rw")
    assert got.axes == CacheAxes(False, False, False, False) and got.remote is None


def test_read_only_env_keeps_uploads_off():
    assert not plan(spec="remote:rw", env={"TURBO_REMOTE_CACHE_READ_ONLY": "1"}).axes.remote_write


def test_naming_a_missing_remote_says_so():
    got = plan(cfg=None, spec="remote:r")
    assert (
        not got.axes.remote
        and len(got.notices) == 1
        and "no remote cache is configured" in got.notices[0]
    )


def test_an_unusable_remote_is_off_with_its_reason():
    signed = RemoteCacheConfig(kind="turbo", url="http://127.0.0.1:1", signature=True)
    got = plan(cfg=signed)
    assert got.remote is None and not got.axes.remote
    assert got.notices == (
        "remote cache off: signatures are on but TURBO_REMOTE_CACHE_SIGNATURE_KEY is not set",
    )
