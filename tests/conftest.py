import os
import sys
from pathlib import Path

# Tests run against the checkout even before `pip install -e .`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

# Every test's workspace keeps its own cache, as a named cache dir does: the repository's shared
# store under ~/.vx (LC-02) would be this user's real one, and repositories made in the same second
# by different tests can share a root commit. The harnesses pass this one VX_ variable through;
# tests of the shared store set HOME and VX_SHARED_STORE themselves.
os.environ["VX_SHARED_STORE"] = "0"
