"""Scenario fixtures: a fresh `repo` per test, and the real remote-cache servers (one per
session, isolated per test by team). What the tests share besides lives in `support/`."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.remote_servers import signed_server, team, turbo_server  # noqa: F401
from support.workspace import Repo


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    root = tmp_path / "ws"
    root.mkdir()
    return Repo(root)
