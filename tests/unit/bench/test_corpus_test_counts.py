"""bench/corpus.py's test counts read jest's and vitest's summaries as the runners print them."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import corpus  # noqa: E402

JEST = """\
Test Suites: 4 failed, 66 passed, 70 total
Tests:       32 failed, 4 skipped, 809 passed, 845 total
pkg:test: Test Suites: 1 failed, 3 passed, 4 total
pkg:test: Tests:       1 failed, 115 passed, 116 total
19 tasks · 0 cached (0%) · 4 failed · wall 5m14s
"""

VITEST = """\
 Test Files  1 failed | 67 passed (68)
      Tests  2 failed | 343 passed | 1 skipped (346)
"""


def test_skipped_tests_and_failed_suites_do_not_change_the_counts():
    """Failed before: a jest line with skipped tests lost its passes (809 read as 0), and the
    suites' failures were added to the tests' (4 + 1 failed suites counted as failed tests), and so
    were vx's failed tasks from its summary line."""
    assert corpus.test_counts(JEST) == (809 + 115, 32 + 1)
    assert corpus.test_counts(VITEST) == (343, 2)
