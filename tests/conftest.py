import os
import sys
from pathlib import Path
from typing import Any

import pytest

# Tests run against the checkout even before `pip install -e .`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--feature",
        action="append",
        default=[],
        metavar="ID",
        help="run only the tests marked with this feature (EX-05), or with any of a family (EX); "
        "repeatable. docs/features.md lists the IDs.",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = [w.upper() for w in config.getoption("feature")]
    if not wanted:
        return
    keep, drop = [], []
    for item in items:
        ids = {i for m in item.iter_markers("feature") for i in m.args}
        chosen = any(w in ids or any(i.split("-")[0] == w for i in ids) for w in wanted)
        (keep if chosen else drop).append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


# Every test's workspace keeps its own cache, as a named cache dir does: the repository's shared
# store under ~/.vx (LC-02) would be this user's real one, and repositories made in the same second
# by different tests can share a root commit. The harnesses pass this one VX_ variable through;
# tests of the shared store set HOME and VX_SHARED_STORE themselves.
os.environ["VX_SHARED_STORE"] = "0"

# Nx copies its native binary into $TMPDIR/nx-native-file-cache-<hash of its install path> on each
# start, and every test installs nx at a new path: ~17 MB per workspace, never removed (a full run
# left 20 GB in /tmp). One directory shared by the run is what a single install would use.
os.environ.setdefault(
    "NX_NATIVE_FILE_CACHE_DIRECTORY",
    os.path.join(os.environ.get("TMPDIR", "/tmp"), f"vx-tests-nx-native-{os.getuid()}"),
)


# ---------------------------------------------------------------- VX_REQUIRE_ALL: no silent skips
# dev/test (so CI) sets VX_REQUIRE_ALL=1: a test that skips for want of something dev/test
# installs (turbo and nx from npm, BuildGrid, PostgreSQL, bazel, bwrap, strace, socat, tmux, …)
# fails instead, so a run cannot go green without the parity and real-tool suites. Only the skips
# below stay skips: what a machine may lack that dev/test does not install (root, an
# architecture, a kernel feature). A skip is matched by the start of its reason; tests/README.md
# lists every skip point and its side.
MAY_SKIP = (
    "needs a PID namespace, which needs root",
    "making another user's files needs root",
    "cannot mount a tmpfs here",
    "no writable cgroup v2 hierarchy here",
    "cannot make a file undeletable here",
    "ptrace not permitted here",
    "needs gcc on x86-64 to build an i386 system-call probe",
    "gcc builds neither a 32-bit nor an int-0x80 x86-64 binary",
    "the racer calls renameat2 by its x86-64 number",
    "the pinned second Node is the linux-x64 build",
    "the standalone build is made for linux-x64 only",
    "the preload path is for Node < 22.21",
    "the seccomp filter is built for x86_64 and arm64 only",
)


def skip_reason(report: Any) -> str:
    """The reason a skipped report gives, without pytest's `Skipped: ` prefix."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def require(report: Any) -> None:
    """Under VX_REQUIRE_ALL=1, turn a skip that MAY_SKIP does not list into a failure."""
    if os.environ.get("VX_REQUIRE_ALL") != "1" or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = skip_reason(report)
    if not reason.startswith(MAY_SKIP):
        report.outcome = "failed"
        report.longrepr = f"skipped, but VX_REQUIRE_ALL=1 requires it to run: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    outcome = yield
    require(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    outcome = yield
    require(outcome.get_result())
