"""bench/corpus.py takes its work directory for itself in every mode that writes there: two runs
on one directory (clones, installs, the state files, vx's store) would undo each other's work."""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import corpus  # noqa: E402


def test_install_only_refuses_a_work_dir_another_run_holds(tmp_path):
    """Failed before: `--install-only` never called `tools.hold` (only `vx_tool` did)."""
    fd = os.open(tmp_path / ".bench-lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another run, as its own open file holds it
        with pytest.raises(SystemExit, match="in use by another bench"):
            corpus.main(["--work", str(tmp_path), "--install-only", "--only", "no-such-repo"])
    finally:
        os.close(fd)
