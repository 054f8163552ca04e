"""KEY fuzzer: a cache hit means the outputs are what running the task would produce now.

Hypothesis generates small workspaces (vx.config.json or turbo.json-only, 2–4 projects with
package.json edges, gitignored and untracked files, env inputs, a lockfile, in-repo symlinks)
and sequences of mutations; after each one `vx run build` runs — with `--summarize`, without it
(the broad flow, where a warm repeat is replayed from a receipt), or after a `--dry=json` — and
every task's status and dist/ are held to the oracle in key_fuzz.py, which derives both from the
files on disk and the env, never from vx.

The bounded run below is part of ./dev/test (fixed seed, no database, no deadline). A long run:

    VX_FUZZ_EXAMPLES=2000 python3 -m pytest -q -p no:cacheprovider tests/scenarios/test_key_fuzz.py

`VX_FUZZ_FEATURES=all` (or a comma list of key_fuzz.KNOWN_OPEN names) adds the patterns vx is
known to get wrong today.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from support import key_fuzz

EXAMPLES = int(os.environ.get("VX_FUZZ_EXAMPLES", "0") or 0)
_wanted = os.environ.get("VX_FUZZ_FEATURES", "")
FEATURES = frozenset(
    key_fuzz.FEATURES
    if _wanted == "all"
    else {f for f in _wanted.split(",") if f} | (set(key_fuzz.FEATURES) - key_fuzz.KNOWN_OPEN)
)
unknown = FEATURES - set(key_fuzz.FEATURES)
assert not unknown, (
    f"VX_FUZZ_FEATURES: unknown {sorted(unknown)}; known: {', '.join(key_fuzz.FEATURES)}"
)

LONG = EXAMPLES > 0
FUZZ = settings(
    max_examples=EXAMPLES or 25,
    deadline=None,
    database=None,
    derandomize=not LONG,  # the bounded run is the same every time; a long run explores
    print_blob=True,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.timeout(0 if LONG else 600)
@FUZZ
@given(case=key_fuzz.cases(FEATURES))
def test_key_fuzz_a_hit_is_what_running_the_task_gives_now(case):
    """KEY-01..KEY-21, RC (receipts): for every generated workspace and mutation sequence, each
    task runs exactly when something it declares changed, and its dist/ always equals what
    running it now writes."""
    with tempfile.TemporaryDirectory(prefix="vx-fuzz-") as tmp:
        ws = key_fuzz.Workspace(case, Path(tmp) / "ws", features=FEATURES)
        ws.create()
        ws.log.append(key_fuzz.describe(case))
        ws.check_run("plain", "the first run")
        for step in case.steps:
            what = ws.apply(step)
            ws.log.append(f"{what} ({step.run})")
            ws.check_run(step.run, what, step.where)
            if step.settle:
                ws.log.append("again")
                ws.check_run("plain", f"{what}, then an unchanged repeat")
