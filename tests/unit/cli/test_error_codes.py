"""Every refusal carries a stable code (docs/cli.md § Error codes), read from its class, and the
CLI answers in JSON when the command line asked for it."""

import errno
import importlib
import json
import pkgutil

import pytest

import vx
from vx import errors
from vx.cli import main as cli


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


@pytest.mark.feature("WS-22")
def test_every_refusal_class_in_vx_carries_one_of_the_codes():
    """Every VxError subclass anywhere in vx (imported whole) names a listed code."""
    for info in pkgutil.walk_packages(vx.__path__, "vx."):
        if ".reapi_pb" in info.name or info.name.endswith(("tui_app", ".reapi")):
            continue  # generated stubs; the optional grpc and textual sides
        importlib.import_module(info.name)
    classes = list(_all_subclasses(errors.VxError))
    assert len(classes) >= 8
    wrong = {
        c.__qualname__: c.code for c in [errors.VxError, *classes] if c.code not in errors.CODES
    }
    assert not wrong, wrong
    assert errors.WorkspaceError.code == "VX_E_NO_WORKSPACE"
    assert errors.ConfigError("m", file="f").code == "VX_E_CONFIG"


@pytest.mark.feature("WS-22")
def test_json_is_asked_by_the_flags_before_the_forwarded_words():
    asked = [
        ["run", "b", "--format", "json"],
        ["run", "b", "--format=json"],
        ["run", "b", "--dry=json"],
        ["bogus", "--format", "json"],
        ["show", "project", "web", "--json"],
    ]
    not_asked = [
        ["run", "b", "--format", "text"],
        ["run", "b", "--", "--format=json"],
        ["run", "b", "--format"],
        ["migrate", "--format", "json"],  # the files it writes, not its output
        ["run", "b", "--json"],
    ]
    assert [cli.wants_json(a) for a in asked] == [True] * len(asked)
    assert [cli.wants_json(a) for a in not_asked] == [False] * len(not_asked)


def _main_raising(monkeypatch, capsys, exc, argv):
    def dispatch(args):
        raise exc

    monkeypatch.setattr(cli, "_dispatch", dispatch)
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.feature("WS-22")
def test_an_internal_error_and_running_out_of_descriptors_answer_with_their_codes(
    monkeypatch, capsys
):
    """A bug is VX_E_INTERNAL (exit 1, no traceback unless asked); EMFILE is the machine's
    limit, VX_E_FDS, a refusal (exit 2) with the ulimit hint; without JSON stdout stays empty."""
    code, out, err = _main_raising(
        monkeypatch, capsys, KeyError("x"), ["run", "b", "--format=json"]
    )
    assert code == 1 and "internal error" in err and "Traceback" not in err
    assert json.loads(out)["error"]["code"] == "VX_E_INTERNAL"
    emfile = OSError(errno.EMFILE, "Too many open files")
    code, out, err = _main_raising(monkeypatch, capsys, emfile, ["last", "--format", "json"])
    doc = json.loads(out)
    assert code == 2 and doc["error"]["code"] == "VX_E_FDS"
    assert doc["error"]["docs"] == "docs/cli.md#vx_e_fds" and "ulimit -n" in err
    code, out, err = _main_raising(monkeypatch, capsys, emfile, ["last"])
    assert code == 2 and out == "" and "ulimit -n" in err


@pytest.mark.feature("WS-22")
def test_a_cache_write_out_of_descriptors_is_the_fds_refusal(tmp_path):
    from vx.store.local import _disk_failure

    assert _disk_failure(OSError(errno.EMFILE, "Too many open files"), tmp_path).code == "VX_E_FDS"
    assert _disk_failure(OSError(errno.EACCES, "Permission denied"), tmp_path).code == (
        "VX_E_REFUSED"
    )


@pytest.mark.feature("WS-22")
def test_only_a_missing_index_table_is_said_as_the_index_changing(monkeypatch, capsys):
    """A table of the cache index or run history gone under a run is another vx's reset, a
    refusal (exit 2); any other sqlite "no such" error (a table vx never makes, a column) is a
    bug of vx and says so."""
    import sqlite3

    for gone in ("no such table: entries", "no such table: store.output_files"):
        code, _, err = _main_raising(
            monkeypatch, capsys, sqlite3.OperationalError(gone), ["run", "b"]
        )
        assert code == 2 and f"the cache index changed under this run: {gone}" in err, err
    for bug in ("no such table: entriez", "no such column: crc", "no such function: foo"):
        code, _, err = _main_raising(monkeypatch, capsys, sqlite3.OperationalError(bug), ["run"])
        assert code == 1 and "internal error" in err and "changed under" not in err, err
