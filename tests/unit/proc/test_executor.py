"""The executor with real processes: output, exit codes, stdin, timeouts, groups, signals, hints.

EX-01 EX-02 EX-05 EX-10 EX-11 EX-12 EX-13 EX-14 EX-16 CLI-59. No mocks: every test spawns
`sh`. Grace values are small so each test stays well under 3 s.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import sys
import time
from pathlib import Path

import pytest

from vx.engine.verdicts import exit_hint, failure_label
from vx.errors import UsageError
from vx.model import LogChunk, ProcessResult
from vx.plan.forwarding import forward_args
from vx.proc.executor import ProcessTable, execute, group_alive, kill_grace_ms

ENV = {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C"}
GRACE_MS = 300


class Recorder:
    """An on_output that keeps every chunk and the group id, and can wait for a word."""

    def __init__(self, table: ProcessTable, react=None):
        self.chunks: list[LogChunk] = []
        self.table = table
        self.pgid: int | None = None
        self.react = react
        self.seen = asyncio.Event()
        self.word = b"ready"

    def __call__(self, chunk: LogChunk) -> None:
        self.chunks.append(chunk)
        self.pgid = self.pgid or next(iter(self.table.pgids), None)
        if self.word in chunk.data:
            self.seen.set()
        if self.react:
            self.react(chunk)


async def run(
    command: str, cwd: Path, *, timeout_ms=None, table=None, on_output=None, grace_ms=GRACE_MS
):
    table = ProcessTable() if table is None else table
    on_output = on_output or (lambda chunk: None)
    return await execute(
        command,
        cwd=cwd,
        env=ENV,
        timeout_ms=timeout_ms,
        on_output=on_output,
        table=table,
        grace_ms=grace_ms,
    )


def bounded(awaitable, seconds: float = 60.0):
    """Fail a test instead of hanging when a signal or an output never arrives (generous: the
    suite runs on a loaded machine, and this bounds a hang, it measures nothing)."""
    return asyncio.wait_for(awaitable, seconds)


def running(pid: int) -> bool:
    """Whether a process exists and is not a zombie (PID 1 here reaps orphans lazily)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def group_running(pgid: int) -> bool:
    """Whether any non-zombie member of the group is left; killpg(pgid, 0) counts zombies."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    for entry in os.listdir("/proc"):
        if entry.isdigit() and running(int(entry)):
            try:
                if os.getpgid(int(entry)) == pgid:
                    return True
            except ProcessLookupError:
                continue
    return False


def stdout(result: ProcessResult) -> bytes:
    return b"".join(c.data for c in result.log if c.stream == 1)


def stderr(result: ProcessResult) -> bytes:
    return b"".join(c.data for c in result.log if c.stream == 2)


# ---------------------------------------------------------------- running and output


@pytest.mark.feature("EX-01")
def test_command_runs_as_sh_c_in_cwd_with_pipes_and_and(tmp_path):
    result = asyncio.run(run("pwd; echo abc | tr a x && echo ok", tmp_path))
    assert result.exit_code == 0 and result.signal is None and not result.timed_out
    assert stdout(result) == f"{tmp_path}\nxbc\nok\n".encode()
    assert result.duration_ms > 0


def test_chunks_arrive_in_order_across_stdout_and_stderr(tmp_path):
    # The shell waits for vx to have seen each line before writing the next one.
    command = (
        "echo one; until [ -e got1 ]; do sleep 0.01; done; "
        "echo two >&2; until [ -e got2 ]; do sleep 0.01; done; echo three"
    )

    def react(chunk: LogChunk) -> None:
        marker = {b"one\n": "got1", b"two\n": "got2"}.get(chunk.data)
        if marker:
            (tmp_path / marker).touch()

    async def main():
        table = ProcessTable()
        recorder = Recorder(table, react)
        return recorder, await run(command, tmp_path, table=table, on_output=recorder)

    recorder, result = asyncio.run(main())
    expected = [LogChunk(1, b"one\n"), LogChunk(2, b"two\n"), LogChunk(1, b"three\n")]
    assert list(result.log) == expected
    assert recorder.chunks == expected  # delivered live, in the same order


@pytest.mark.parametrize(
    "command, code, sig",
    [
        ("true", 0, None),
        ("exit 3", 3, None),
        ("kill -TERM $$", 143, 15),
        ("kill -SEGV $$", 139, 11),
    ],
)
def test_exit_codes_and_signal_deaths_are_128_plus_n(tmp_path, command, code, sig):
    result = asyncio.run(run(command, tmp_path))
    assert (result.exit_code, result.signal) == (code, sig)
    assert not result.aborted


@pytest.mark.feature("EX-10")
def test_stdin_is_at_eof(tmp_path):
    result = asyncio.run(run("cat; echo after-cat", tmp_path, timeout_ms=2000))
    assert not result.timed_out
    assert stdout(result) == b"after-cat\n"


@pytest.mark.feature("EX-13")
def test_cpu_and_peak_rss_of_the_child(tmp_path):
    # A peak at or below vx's own is not reported (vfork charges vx's size to the child), and vx
    # here is this test process, whose peak grows with every test the suite ran before: the child
    # allocates past it, whatever it is by now.
    size = max(200 << 20, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 + (64 << 20))
    allocate = f"{sys.executable} -c \"b = b'x' * {size}; sum(range(300000))\""
    result = asyncio.run(run(allocate, tmp_path))
    assert result.exit_code == 0
    assert result.cpu_ms is not None and result.cpu_ms > 5
    assert result.peak_rss_bytes is not None and result.peak_rss_bytes >= size


@pytest.mark.feature("EX-13")
def test_peak_rss_at_or_below_vx_footprint_is_not_reported(tmp_path):
    # vfork charges vx's own resident set to the child at exec; `true` never beats it.
    result = asyncio.run(run("true", tmp_path))
    assert result.peak_rss_bytes is None
    assert result.cpu_ms is not None


def test_output_callback_error_is_raised_after_the_child_is_reaped(tmp_path):
    def boom(chunk: LogChunk) -> None:
        raise RuntimeError("reporter bug")

    async def main():
        table = ProcessTable()
        with pytest.raises(RuntimeError, match="reporter bug"):
            await run("echo x", tmp_path, table=table, on_output=boom)
        return table

    assert asyncio.run(main()).pgids == ()


# ---------------------------------------------------------------- timeouts, groups, drain


@pytest.mark.feature("EX-05")
def test_timeout_terms_the_whole_group_including_a_grandchild(tmp_path):
    command = "sh -c 'sleep 300 & echo $!; wait'; :"

    async def main():
        table = ProcessTable()
        recorder = Recorder(table)
        recorder.word = b"\n"
        return recorder, await run(
            command, tmp_path, timeout_ms=200, table=table, on_output=recorder, grace_ms=60_000
        )

    recorder, result = asyncio.run(main())
    assert (result.timed_out, result.exit_code, result.signal) == (True, 143, 15)
    assert result.duration_ms < 30_000  # TERM sufficed: no wait for the minute's grace
    grandchild = int(stdout(result))
    assert not running(grandchild)
    assert recorder.pgid is not None and not group_running(recorder.pgid)
    assert failure_label(result) == "failed (timed out, exit 143)"


@pytest.mark.feature("EX-05")
def test_a_shell_ignoring_term_is_killed_after_the_grace_137(tmp_path):
    async def main():
        table = ProcessTable()
        recorder = Recorder(table)
        return recorder, await run(
            "trap '' TERM; echo ready; sleep 30",
            tmp_path,
            timeout_ms=100,
            table=table,
            on_output=recorder,
            grace_ms=200,
        )

    recorder, result = asyncio.run(main())
    assert (result.timed_out, result.exit_code, result.signal) == (True, 137, 9)
    assert 300 <= result.duration_ms < 10_000  # the grace was waited, the 30 s sleep was not
    assert not group_running(recorder.pgid)  # gone on return: SIGKILL is asynchronous, vx waits
    assert failure_label(result) == "failed (timed out, exit 137)"


@pytest.mark.feature("EX-12")
def test_background_child_holding_stdout_does_not_hold_the_task(tmp_path):
    async def main():
        table = ProcessTable()
        recorder = Recorder(table)
        started = time.monotonic()
        result = await run("sleep 120 & echo $$", tmp_path, table=table, on_output=recorder)
        return recorder, result, time.monotonic() - started

    recorder, result, elapsed = asyncio.run(main())
    pgid = int(result.log[0].data)  # the shell's pid is its group's id
    try:
        assert result.exit_code == 0
        assert 0.2 <= elapsed < 60  # the 250 ms drain, not the 120 s sleep
        assert result.log[-1].stream == 2 and b"250 ms" in result.log[-1].data
        assert recorder.chunks[-1] == result.log[-1]  # the note is delivered live too
        assert group_running(pgid)  # the background child was left alone, only cut off
    finally:
        os.killpg(pgid, signal.SIGKILL)


def test_trio_discipline_cancellation_kills_the_group_and_reaps_the_shell(tmp_path):
    async def main():
        table = ProcessTable()
        recorder = Recorder(table)
        task = asyncio.create_task(
            run("echo ready; sleep 120", tmp_path, table=table, on_output=recorder, grace_ms=90_000)
        )
        await bounded(recorder.seen.wait())
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await bounded(task, 60)
        return table, recorder.pgid, time.monotonic() - started

    table, pgid, elapsed = asyncio.run(main())
    assert elapsed < 45  # SIGTERM ended it: neither the 90 s grace nor the 120 s sleep
    assert table.pgids == ()
    assert not group_running(pgid)
    with pytest.raises(ChildProcessError):  # already reaped by execute()
        os.waitpid(pgid, os.WNOHANG)


def test_a_second_cancel_kills_at_once(tmp_path):
    async def main():
        table = ProcessTable()
        recorder = Recorder(table)
        task = asyncio.create_task(
            run(
                "trap '' TERM; echo ready; sleep 600",
                tmp_path,
                table=table,
                on_output=recorder,
                grace_ms=120_000,
            )
        )
        await bounded(recorder.seen.wait())
        started = time.monotonic()
        task.cancel()
        await asyncio.sleep(0)  # let the first cancel land and SIGTERM go out
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await bounded(task)
        return recorder.pgid, time.monotonic() - started

    pgid, elapsed = asyncio.run(main())
    assert elapsed < 60  # far below the 120 s grace
    assert not group_running(pgid)


@pytest.mark.feature("EX-11")
def test_shutdown_stops_every_group_after_its_grace_and_marks_them_aborted(tmp_path):
    commands = [
        "echo ready; sleep 600",
        "trap '' TERM; echo ready; sleep 600",
        "echo ready; sleep 600 & wait",
    ]

    async def main():
        table = ProcessTable()
        recorders = [Recorder(table) for _ in commands]
        tasks = [
            asyncio.create_task(run(c, tmp_path, table=table, on_output=r))
            for c, r in zip(commands, recorders)
        ]
        for recorder in recorders:
            await bounded(recorder.seen.wait())
        pgids = set(table.pgids)
        started = time.monotonic()
        await table.shutdown(0.3)
        elapsed = time.monotonic() - started
        return pgids, elapsed, await bounded(asyncio.gather(*tasks)), table

    pgids, elapsed, results, table = asyncio.run(main())
    # The grace bounds the wait, not the tasks' 600 s sleeps (no tighter wall bound: a loaded
    # machine may take seconds to schedule the kills).
    assert len(pgids) == 3 and elapsed < 60
    assert table.pgids == () and not any(group_running(p) for p in pgids)
    assert all(r.aborted and not r.timed_out for r in results)
    assert sorted(r.exit_code for r in results) == [137, 143, 143]
    assert failure_label(results[0]) == "aborted (exit 143, 128 + SIGTERM)"


@pytest.mark.feature("EX-16")
def test_aborted_only_while_the_run_is_stopping(tmp_path):
    async def main():
        table = ProcessTable()
        before = await run("kill -TERM $$", tmp_path, table=table)
        recorder = Recorder(table)
        task = asyncio.create_task(
            run("echo ready; sleep 30", tmp_path, table=table, on_output=recorder)
        )
        await bounded(recorder.seen.wait())
        table.terminate_all(signal.SIGHUP)  # forwarded as SIGTERM
        return before, await bounded(task)

    before, during = asyncio.run(main())
    assert not before.aborted and failure_label(before) == "failed (exit 143, 128 + SIGTERM)"
    assert during.aborted and (during.exit_code, during.signal) == (143, 15)


def test_terminate_all_signals_each_group_once(tmp_path):
    async def main():
        table = ProcessTable()
        recorder = Recorder(table)
        command = "trap 'echo got-term' TERM; echo ready; while :; do sleep 0.05; done"
        task = asyncio.create_task(run(command, tmp_path, table=table, on_output=recorder))
        await bounded(recorder.seen.wait())
        recorder.seen.clear()
        recorder.word = b"got-term"
        table.terminate_all()
        table.terminate_all()  # a repeat: the group has had its signal
        await bounded(recorder.seen.wait())
        table.kill_all()
        return await bounded(task)

    result = asyncio.run(main())
    assert stdout(result).count(b"got-term") == 1
    assert result.aborted and result.exit_code == 137


def test_group_alive_sees_a_running_group_and_not_a_dead_one(tmp_path):
    async def main():
        table = ProcessTable()
        recorder = Recorder(table)
        task = asyncio.create_task(
            run("echo ready; sleep 30", tmp_path, table=table, on_output=recorder)
        )
        await bounded(recorder.seen.wait())
        alive_before = group_alive(recorder.pgid)
        table.kill_all()
        await bounded(task)
        # The shell is reaped, but the SIGKILLed `sleep` may still be in its exit path (kill(2)
        # returns before): the run's shutdown is what waits for the group, so wait as it does.
        await bounded(table.shutdown(grace_s=60.0), 120.0)
        return alive_before, group_alive(recorder.pgid)

    assert asyncio.run(main()) == (True, False)


def test_spawn_failure_is_a_result_with_exit_127(tmp_path):
    missing = tmp_path / "gone"
    result = asyncio.run(run("true", missing))
    assert result.exit_code == 127 and str(missing) in result.spawn_error
    assert failure_label(result) == "failed (exit 127, could not start)"
    assert exit_hint(result, "true", ENV["PATH"].split(":")) == result.spawn_error


def test_kill_grace_comes_from_the_environment():
    assert kill_grace_ms({}) == 2000
    assert kill_grace_ms({"VX_KILL_GRACE_MS": "250"}) == 250
    with pytest.raises(UsageError):
        kill_grace_ms({"VX_KILL_GRACE_MS": "2s"})


# ---------------------------------------------------------------- hints (EX-14)


@pytest.mark.feature("EX-14")
def test_127_names_the_missing_word_and_the_dirs_searched(tmp_path):
    result = asyncio.run(run("FOO=1 vx-no-such-tool --flag", tmp_path))
    hint = exit_hint(result, "FOO=1 vx-no-such-tool --flag", ["/a/node_modules/.bin", "/usr/bin"])
    assert result.exit_code == 127
    assert "`vx-no-such-tool`" in hint and "/a/node_modules/.bin, /usr/bin" in hint


@pytest.mark.feature("EX-14")
def test_127_for_a_script_whose_interpreter_is_missing(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/vx/no/such/interp\necho hi\n")
    script.chmod(0o755)
    result = asyncio.run(run("./run.sh", tmp_path))
    assert result.exit_code == 127
    assert "`/vx/no/such/interp`" in exit_hint(result, "./run.sh", [], cwd=tmp_path)


@pytest.mark.feature("EX-14")
def test_127_for_a_script_with_crlf_line_endings(tmp_path):
    script = tmp_path / "run.sh"
    script.write_bytes(b"#!/bin/sh\r\necho hi\r\n")
    script.chmod(0o755)
    result = asyncio.run(run("./run.sh", tmp_path))
    assert result.exit_code == 127
    assert "CRLF" in exit_hint(result, "./run.sh", [], cwd=tmp_path)


@pytest.mark.feature("EX-14")
def test_126_suggests_chmod(tmp_path):
    (tmp_path / "build.sh").write_text("echo hi\n")
    result = asyncio.run(run("./build.sh", tmp_path))
    assert result.exit_code == 126
    assert (
        exit_hint(result, "./build.sh", [], cwd=tmp_path)
        == "`./build.sh` is not executable: run `chmod +x ./build.sh`"
    )


@pytest.mark.feature("EX-14")
def test_signal_deaths_name_the_signal_and_cause(tmp_path):
    result = asyncio.run(run("kill -KILL $$", tmp_path))
    assert failure_label(result) == "failed (exit 137, 128 + SIGKILL)"
    assert "SIGKILL" in exit_hint(result, "x", []) and "out-of-memory" in exit_hint(result, "x", [])
    for number, word in [(11, "segmentation"), (13, "pipe"), (24, "ulimit"), (31, "seccomp")]:
        hint = exit_hint(ProcessResult(exit_code=128 + number, duration_ms=1), "x", [])
        assert word in hint


@pytest.mark.feature("EX-14")
def test_plain_failures_have_no_hint_and_a_plain_label():
    result = ProcessResult(exit_code=1, duration_ms=1)
    assert exit_hint(result, "x", []) is None
    assert failure_label(result) == "failed (exit 1)"
    assert failure_label(ProcessResult(exit_code=255, duration_ms=1)) == "failed (exit 255)"


# ---------------------------------------------------------------- argument forwarding (EX-02)


@pytest.mark.feature("EX-02")
@pytest.mark.parametrize(
    "command, args, expected",
    [
        ("tsc", ["--watch", "-p", "a/b.json"], "tsc --watch -p a/b.json"),
        ("tsc", ["a b", "it's", "", "x=1,2:%@+"], "tsc 'a b' 'it'\"'\"'s' '' x=1,2:%@+"),
        ("tsc", ["$HOME", "*.ts", "a;b"], "tsc '$HOME' '*.ts' 'a;b'"),
        ("tsc  # compile", ["-p", "x"], "tsc -p x  # compile"),
        ("echo '#a' \"# b\" c#d $# ${#x}", ["z"], "echo '#a' \"# b\" c#d $# ${#x} z"),
        ("build\ntest # all\n", ["--ci"], "build\ntest --ci # all\n"),
        (
            "cat <<EOF > out.txt\nhello # not a comment\nEOF",
            ["x y"],
            "cat <<EOF > out.txt 'x y'\nhello # not a comment\nEOF",
        ),
        (
            "cat <<-'END'\n\tbody\n\tEND\necho done",
            ["q"],
            "cat <<-'END'\n\tbody\n\tEND\necho done q",
        ),
        ("lint\n# a closing comment", ["--fix"], "lint --fix\n# a closing comment"),
        ("tsc", [], "tsc"),
    ],
)
def test_forward_args(command, args, expected):
    assert forward_args(command, args) == expected


@pytest.mark.feature("EX-02")
def test_forwarded_args_reach_the_command_verbatim(tmp_path):
    args = ["a b", "it's", "$HOME", "*"]
    command = forward_args("printf '%s|' # show each arg", args)
    result = asyncio.run(run(command, tmp_path))
    assert stdout(result) == b"a b|it's|$HOME|*|"


@pytest.mark.feature("EX-02")
def test_reaping_without_pidfd_falls_back_to_a_waiting_thread(tmp_path, monkeypatch):
    # Older kernels and macOS have no pidfd_open; the wait then runs in a thread.
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    result = asyncio.run(run("echo hi; exit 4", tmp_path))
    timed = asyncio.run(run("sleep 30", tmp_path, timeout_ms=50))
    assert (result.exit_code, stdout(result), result.cpu_ms is not None) == (4, b"hi\n", True)
    assert (timed.timed_out, timed.exit_code) == (True, 143)


@pytest.mark.feature("EX-14")
def test_127_for_a_script_that_does_not_exist(tmp_path):
    result = asyncio.run(run("./nope.sh --x", tmp_path))
    assert (
        exit_hint(result, "./nope.sh --x", [], cwd=tmp_path)
        == f"`./nope.sh` does not exist in {tmp_path}"
    )
    assert "interpreter" in exit_hint(result, "./nope.sh --x", [])


@pytest.mark.feature("EX-02")
def test_settle_group_waits_for_a_background_child_that_ends_by_itself(tmp_path):
    """Item 3: with settle_group, a child that outlives the shell is waited for (its output is
    still read) and nothing is stopped. It spins until the shell is reaped, then writes and exits."""
    command = (
        "p=$$; (while kill -0 $p 2>/dev/null; do :; done; echo late > late.txt; echo bg) & exit 0"
    )

    async def main():
        return await execute(
            command,
            cwd=tmp_path,
            env=ENV,
            timeout_ms=None,
            on_output=lambda c: None,
            table=ProcessTable(),
            grace_ms=60_000,
            settle_group=True,
        )

    result = asyncio.run(bounded(main(), 30))
    assert result.exit_code == 0 and result.stopped_strays is None
    assert (tmp_path / "late.txt").read_text() == "late\n"
    assert stdout(result) == b"bg\n" and b"250 ms" not in stderr(result)


@pytest.mark.feature("EX-02")
def test_settle_group_stops_a_child_that_does_not_end_term_then_kill(tmp_path):
    """Item 3: a child blocked forever is SIGTERMed after the grace; one ignoring SIGTERM is KILLed."""
    (tmp_path / "gate").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "gate")

    async def main(command):
        return await execute(
            command,
            cwd=tmp_path,
            env=ENV,
            timeout_ms=None,
            on_output=lambda c: None,
            table=ProcessTable(),
            grace_ms=GRACE_MS,
            settle_group=True,
        )

    termed = asyncio.run(bounded(main("(cat gate) >/dev/null 2>&1 & echo $!; exit 0")))
    assert termed.exit_code == 0 and termed.stopped_strays == "SIGTERM"
    assert not running(int(stdout(termed)))
    killed = asyncio.run(
        bounded(main("(trap '' TERM; cat gate) >/dev/null 2>&1 & echo $!; exit 0"))
    )
    assert killed.stopped_strays == "SIGKILL" and not running(int(stdout(killed)))


@pytest.mark.feature("EX-05")
def test_a_killed_grandchild_slow_to_exit_is_gone_when_the_stop_returns(tmp_path):
    # Freeing a gigabyte of touched memory makes a SIGKILLed process's exit take a while:
    # kill(2) returns at once, so a stop that returns on the signal leaves it running.
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "b = b'x' * (1 << 30); print('ready', flush=True); time.sleep(30)"
    )
    hog = f'{sys.executable} -c "{script}"'

    async def main():
        table = ProcessTable()
        recorder = Recorder(table)
        task = asyncio.ensure_future(
            run(
                f"trap '' TERM; {hog} & wait",
                tmp_path,
                table=table,
                on_output=recorder,
                grace_ms=100,
            )
        )
        await bounded(recorder.seen.wait(), 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return recorder

    recorder = asyncio.run(main())
    assert recorder.pgid is not None and not group_running(recorder.pgid)


# ---------------------------------------------------------------- a pty for the output


@pytest.fixture
def pty():
    """Tasks started in the test write to a 100x30 pty; pipes again after it."""
    from vx.proc import spawn

    spawn.lend_pty((100, 30))
    yield
    spawn.lend_pty(None)


def ptys_open() -> list[str]:
    """The ptys this process holds (only those: another test's files may close meanwhile)."""
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass  # closed while listed
    return sorted(link for link in links if link == "/dev/ptmx" or link.startswith("/dev/pts/"))


@pytest.mark.feature("EX-24")
def test_on_a_pty_stdout_and_stderr_are_one_untranslated_terminal(tmp_path, pty):
    command = (
        "[ -t 1 ] && [ -t 2 ] && echo both-tty; [ -t 0 ] || echo stdin-not-tty; cat; "
        "stty size <&1; echo err >&2; printf 'a\\rb\\n'"
    )
    result = asyncio.run(run(command, tmp_path, timeout_ms=5000))
    assert result.exit_code == 0 and not result.timed_out
    assert {chunk.stream for chunk in result.log} == {1}
    assert stdout(result) == b"both-tty\nstdin-not-tty\n30 100\nerr\na\rb\n"


@pytest.mark.feature("EX-24")
def test_on_a_pty_every_byte_arrives_and_no_descriptor_stays_open(tmp_path, pty):
    """Output written just before the shell exits is read whole (the master's EIO comes after
    it), for several tasks at once, and each pty is closed once its task is reaped."""
    expected = b"".join(b"%d\n" % n for n in range(1, 50001))

    async def main():
        table = ProcessTable()
        return await asyncio.gather(*(run("seq 1 50000", tmp_path, table=table) for _ in range(8)))

    before = ptys_open()
    results = asyncio.run(main())
    assert [stdout(r) == expected for r in results] == [True] * 8
    assert ptys_open() == before


@pytest.mark.feature("EX-24")
def test_on_a_pty_a_timeout_still_stops_the_whole_group(tmp_path, pty):
    command = "sleep 600 & echo $! > bg; echo ready; wait"
    result = asyncio.run(run(command, tmp_path, timeout_ms=1000))
    assert result.timed_out and stdout(result) == b"ready\n"
    assert not running(int((tmp_path / "bg").read_text()))
