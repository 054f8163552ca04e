import os
import sys
from pathlib import Path

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
