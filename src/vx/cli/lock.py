"""`vx lock [--check]`: write vx-lock.json, or say whether the configs drifted from it
(vx.config.lock)."""

from __future__ import annotations

import os
from pathlib import Path

from vx.cli.args import Args, say
from vx.errors import EXIT_OK, EXIT_TASK_FAILED


def lock_verb(args: Args, argv: list[str]) -> int:
    from vx.config import lock
    from vx.config.loader import code_configs
    from vx.workspace import discover as workspace

    ws = workspace.discover(Path(os.getcwd()))
    code = code_configs(ws)
    if args.check:
        drift = lock.drift(ws, code, os.environ)
        if not drift:
            say(f"vx lock --check: {lock.LOCK_FILE} holds")
            return EXIT_OK
        for line in drift:
            say(f"vx lock --check: {line}")
        say("hint: run `vx lock` and commit vx-lock.json")
        return EXIT_TASK_FAILED
    path, count = lock.write(ws, code, os.environ)
    configs = "config" if count == 1 else "configs"
    say(f"vx lock: wrote {os.path.relpath(path)} ({count} {configs} written as code)")
    return EXIT_OK
