"""bench/corpus.py's `--only` narrows every mode that lists repositories, as it narrows a run."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import corpus  # noqa: E402


def test_only_narrows_the_list_as_it_narrows_a_run(tmp_path, capsys):
    """Failed before: `--list` printed every repository whatever `--only` said."""
    corpus.main(["--work", str(tmp_path), "--list", "--only", "floating-ui"])
    slugs = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line[:1] != " "]
    assert slugs == [r.slug for r in corpus.CORPUS if "floating-ui" in r.slug] != []
