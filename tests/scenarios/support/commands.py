"""The system commands scenarios run for real (bwrap, strace, node, socat, curl, …): a test or
module that needs some is skipped where one is missing, and dev/test installs them all."""

from __future__ import annotations

import shutil

import pytest


def needs(*commands: str) -> pytest.MarkDecorator:
    """A skip mark for where one of `commands` is not on PATH (a test's decorator, or a module's
    `pytestmark`)."""
    listed = (
        commands[0] if len(commands) == 1 else ", ".join(commands[:-1]) + " and " + commands[-1]
    )
    verb = "is" if len(commands) == 1 else "are"
    return pytest.mark.skipif(
        any(shutil.which(c) is None for c in commands),
        reason=f"{listed} {verb} installed by dev/test",
    )
