"""The toolchain check a remote action runs before its command (engine/remote.py `guarded`),
run here under /bin/sh as a worker would run it: the key's Node version and runtime probes
against what the PATH and the probes give, one line naming a difference, the command itself
untouched when they match."""

import os
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vx.engine.remote import MISMATCH_EXIT, guarded, mismatch


class Outcome(NamedTuple):  # what a worker's run gives, as far as `mismatch` reads it
    exit_code: int
    stdout: bytes
    stderr: bytes


def fake_node(tmp_path: Path, version: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "node").write_text(f"#!/bin/sh\necho {version}\n")
    (bin_dir / "node").chmod(0o755)
    return bin_dir


def run(
    tmp_path: Path, script: str, path: str, project: str = "packages/a", env: dict | None = None
) -> Outcome:
    cwd = tmp_path / "root" / project
    cwd.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["/bin/sh", "-c", script],
        cwd=cwd,
        env={**(env or {}), "PATH": path},
        capture_output=True,
        timeout=60,
    )
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.feature("RC-10")
def test_a_matching_node_runs_the_command_as_it_was_written(tmp_path):
    bin_dir = fake_node(tmp_path, "v20.1.0")
    command = "printf '%s|' \"it's\" $0; exit 3"
    got = run(tmp_path, guarded(command, "packages/a", (("node", "v20.1.0"),)), f"{bin_dir}:/bin")
    assert got.exit_code == 3 and got.stdout == b"it's|/bin/sh|" and got.stderr == b""
    assert mismatch(got) is None


@pytest.mark.feature("RC-10")
def test_another_node_or_none_refuses_with_one_line_naming_both(tmp_path):
    bin_dir = fake_node(tmp_path, "v18.20.0")
    script = guarded("echo built", "packages/a", (("node", "v20.1.0"),))
    got = run(tmp_path, script, f"{bin_dir}:/bin")
    assert got.exit_code == MISMATCH_EXIT and got.stdout == b""
    assert mismatch(got) == "worker has node v18.20.0, the key has v20.1.0"
    empty = tmp_path / "empty"
    empty.mkdir()
    absent = run(tmp_path, script, str(empty))
    assert mismatch(absent) == "worker has node absent, the key has v20.1.0"


@pytest.mark.feature("RC-10")
def test_a_command_that_exits_with_the_reserved_code_is_not_a_refusal():
    assert mismatch(Outcome(MISMATCH_EXIT, b"", b"its own failure\n")) is None


@pytest.mark.feature("RC-10")
def test_probes_run_again_in_the_project_and_at_the_root(tmp_path):
    (tmp_path / "root" / "marker").parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "root" / "marker").write_text("root\n")
    runtime = (
        ('runtime:basename "$PWD":stdout', "a"),
        ('runtime:basename "$PWD":stderr', ""),
        ("ws-runtime:cat marker; echo warn >&2:stdout", "root"),
        ("ws-runtime:cat marker; echo warn >&2:stderr", "warn"),
    )
    ok = run(tmp_path, guarded("echo built", "packages/a", runtime), "/usr/bin:/bin")
    assert (ok.exit_code, ok.stdout) == (0, b"built\n"), ok.stderr
    other = (*runtime[:3], ("ws-runtime:cat marker; echo warn >&2:stderr", "quiet"))
    refused = run(tmp_path, guarded("echo built", "packages/a", other), "/usr/bin:/bin")
    assert mismatch(refused) == (
        "the runtime input `cat marker; echo warn >&2` writes warn to stderr on the worker, "
        "the key has quiet"
    )


@pytest.mark.feature("RC-10")
def test_a_probe_that_fails_on_the_worker_refuses(tmp_path):
    runtime = (("runtime:exit 4:stdout", ""), ("runtime:exit 4:stderr", ""))
    got = run(tmp_path, guarded("echo built", "", runtime), "/usr/bin:/bin", project="")
    assert mismatch(got) == "the runtime input `exit 4` exits with 4 on the worker"


@pytest.mark.feature("RC-10")
@settings(max_examples=25, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(" \t\n\r\x0b\x0cab'\"$`\\*?[]")), max_size=12))
def test_the_worker_trims_a_probe_as_the_key_did(tmp_path_factory, text):
    """A probe printing `text` matches the key's Python-trimmed value of the same output."""
    tmp_path = tmp_path_factory.mktemp("trim")
    (tmp_path / "out").write_text(text)
    probe = f"cat {tmp_path / 'out'}"
    runtime = ((f"runtime:{probe}:stdout", text.strip()), (f"runtime:{probe}:stderr", ""))
    got = run(tmp_path, guarded("echo built", "", runtime), os.defpath, project="")
    assert (got.exit_code, mismatch(got)) == (0, None), got.stderr


@pytest.mark.feature("RC-10")
def test_a_key_without_runtime_sends_the_command_alone():
    assert guarded("echo built", "packages/a", ()) == "echo built"


@pytest.mark.feature("RC-10")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs a PID namespace, which needs root")
def test_a_probe_never_writes_through_a_name_planted_in_the_workers_tmp(tmp_path):
    """Item: review of the remote toolchain check. The probe's stderr went to
    `$TMPDIR/vx-probe.$$`, a name anyone sharing the worker's /tmp can guess and plant as a
    symlink: the check truncated and wrote the file it points at (and read the planter's text as
    the probe's). The shell here is pid 1 of its own PID namespace, so `$$` is known."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (shared / "vx-probe.1").symlink_to(victim)
    runtime = (("runtime:echo oops >&2:stdout", ""), ("runtime:echo oops >&2:stderr", "oops"))
    script = guarded("echo built", "", runtime)
    proc = subprocess.run(
        ["unshare", "--pid", "--fork", "/bin/sh", "-c", script],
        cwd=tmp_path,
        env={"PATH": os.defpath, "TMPDIR": str(shared)},
        capture_output=True,
        timeout=60,
    )
    assert victim.read_text() == "precious\n"
    assert (proc.returncode, proc.stdout) == (0, b"built\n"), proc.stderr
    assert sorted(p.name for p in shared.iterdir()) == ["vx-probe.1"]  # nothing left behind


@pytest.mark.feature("RC-10")
def test_the_command_sees_its_environment_as_shipped_whatever_the_check_sets(tmp_path):
    """Item: review of the remote toolchain check. The check's shell variables (vx_k, vx_t, ...)
    were set in the shell that then runs the command: a variable of the task's environment of
    one of those names reached the command with the check's value instead of its own."""
    bin_dir = fake_node(tmp_path, "v20.1.0")
    probe = "echo probed"
    runtime = (
        ("node", "v20.1.0"),
        (f"runtime:{probe}:stdout", "probed"),
        (f"runtime:{probe}:stderr", ""),
    )
    names = ("vx_k", "vx_n", "vx_t", "vx_o", "vx_e", "vx_r", "vx_w", "vx_d", "vx_nl")
    command = "".join(f'printf "%s|" "${name}"; ' for name in names)
    env = {name: f"mine-{name}" for name in names}
    got = run(tmp_path, guarded(command, "packages/a", runtime), f"{bin_dir}:/bin", env=env)
    assert got.stdout.decode() == "".join(f"mine-{name}|" for name in names), got.stderr
    assert got.exit_code == 0 and mismatch(got) is None


@pytest.mark.feature("RC-10")
def test_a_probe_too_long_to_send_refuses_instead_of_failing_the_worker(tmp_path):
    """Item: review of the remote toolchain check. The keyed outputs go into the action's one
    `sh -c` argument, which the kernel caps (128 KiB on Linux): a probe printing more (an
    `npm ls`) made an action no worker could start, a worker failure that sends every later
    remote task of the run here. Such a key is refused as a mismatch: this task runs here."""
    probe = "cat big.txt"
    big = "x" * 200_000
    runtime = ((f"runtime:{probe}:stdout", big), (f"runtime:{probe}:stderr", ""))
    got = run(tmp_path, guarded("echo built", "", runtime), os.defpath, project="")
    assert got.exit_code == MISMATCH_EXIT and got.stdout == b""
    assert mismatch(got) == "the runtime input `cat big.txt` prints too much to check on the worker"


@pytest.mark.feature("RC-10")
def test_a_probe_that_prints_a_nul_refuses_instead_of_failing_the_worker(tmp_path):
    """Item: review of the remote toolchain check. A NUL in a probe's output went into the
    action's `sh -c` argument, which no process can be started with (and a shell's `$(...)`
    drops it): an action no worker could start. Such a key is refused: this task runs here."""
    probe = "printf 'a\\\\0b'"
    runtime = ((f"runtime:{probe}:stdout", "a\0b"), (f"runtime:{probe}:stderr", ""))
    got = run(tmp_path, guarded("echo built", "", runtime), os.defpath, project="")
    assert got.exit_code == MISMATCH_EXIT and got.stdout == b""
    assert (
        mismatch(got)
        == f"the runtime input `{probe}` prints a NUL byte, which the worker cannot compare"
    )
