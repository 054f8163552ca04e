"""--verify=inputs, the pure parts: what counts as read, which entry covers a file, the report (LG-03)."""

from pathlib import Path

import pytest

from vx.errors import UsageError
from vx.model import TaskId
from vx.sandbox.trace import Access
from vx.verify import Undeclared, Verdict, VerifyReport, cover_entry, parse_mode, read_paths, render

ROOT = Path("/ws")


def test_reads_are_workspace_files_read_or_executed_before_the_task_wrote_them():
    accesses = [
        Access(1, "read", "openat", "/ws/pkg/src/a.js", real="/ws/pkg/src/a.js"),
        Access(1, "write", "openat", "/ws/pkg/tmp/x"),
        Access(1, "read", "openat", "/ws/pkg/tmp/x"),  # its own scratch file: not an input
        Access(1, "read", "openat", "/ws/pkg/link.js", real="/ws/shared/real.js"),  # the target counts
        Access(2, "exec", "execve", "/ws/pkg/run.sh"),
        Access(2, "read", "openat", "/ws/pkg/missing", errno="ENOENT"),
        Access(2, "list", "openat", "/ws/pkg/src"),
        Access(2, "read", "openat", "/usr/lib/node.so"),
        Access(2, "read", "openat", "/ws-other/x"),
        Access(3, "read", "openat", "/ws/pkg/src/a.js", real="/ws/pkg/src/a.js"),  # once
    ]
    assert read_paths(accesses, ROOT) == ["pkg/src/a.js", "shared/real.js", "pkg/run.sh"]


@pytest.mark.parametrize("path, project, entry", [
    ("packages/app/config.json", "packages/app", 'files: ["config.json"]'),
    ("packages/shared/x.js", "packages/app", 'workspaceFiles: ["packages/shared/x.js"]'),
    ("tsconfig.base.json", "packages/app", 'workspaceFiles: ["tsconfig.base.json"]'),
    ("scripts/gen.js", "", 'files: ["scripts/gen.js"]'),
    ("packages/app/src/x.js", "", 'workspaceFiles: ["packages/app/src/x.js"]'),  # a nested project
])
def test_the_entry_that_covers_a_file(path, project, entry):
    assert cover_entry(path, project, nested=["packages/app", "packages/shared"] if project == "" else ()) == entry


def test_modes():
    assert parse_mode("") == parse_mode("inputs") == "inputs" and parse_mode(None) is None
    with pytest.raises(UsageError, match="not implemented yet"):
        parse_mode("determinism")
    with pytest.raises(UsageError, match="not a mode"):
        parse_mode("inptus")


def test_render_counts_and_blocks():
    app, lib = TaskId("app", "build"), TaskId("lib", "build")
    report = VerifyReport((Verdict(lib, ()), Verdict(app, (Undeclared("x", "../x", 'cache.inputs.files: ["x"]'),))),
                          untraced=(TaskId("b", "build"),))
    assert render(report) == [
        "app#build read 1 undeclared input:",
        '  ../x  add cache.inputs.files: ["x"]',
        "",
        "verify: 1 undeclared input in 1 of 2 traced tasks",
        "verify: not traced (did not run): b#build",
    ]
    assert report.exit_code == 1 and VerifyReport((Verdict(lib, ()),)).exit_code == 0
