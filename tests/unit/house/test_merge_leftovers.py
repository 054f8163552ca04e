"""No merge conflict left in a tracked file: a marker in a doc or a config still parses (or is
prose) and would ship without any other test noticing."""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
MARKER = re.compile(rb"^(<{7}|>{7})( |$)|^={7}$", re.M)


def test_no_tracked_file_holds_a_conflict_marker():
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    found = []
    for rel in filter(None, listed):
        path = ROOT / rel.decode()
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        for match in MARKER.finditer(data):
            line = data.count(b"\n", 0, match.start()) + 1
            found.append(f"{rel.decode()}:{line}")
    assert not found, f"conflict markers: {found}"
