"""A failure log is kept in the cache's `logs/` and the oldest past 50 are pruned; a checkout
that carries `.vx/cache/logs` as a symbolic link must not aim either at another directory."""

import os

import pytest
from conftest import npm_workspace


@pytest.mark.feature("OBS-13")
def test_a_symlinked_logs_dir_is_neither_written_nor_pruned(repo, tmp_path):
    """A repository committed `.vx/cache/logs` as a link to a directory of someone's *.log
    files; a failing task's log went there and vx pruned that directory to its 50 newest *.log
    files — files outside the workspace deleted. The log is not kept; the run fails as it would."""
    victim = tmp_path / "victim"
    victim.mkdir()
    for i in range(60):
        (victim / f"{i:03d}-app.log").write_text("precious")
    files = npm_workspace(
        {"a": {"tasks": {"build": {"exec": {"command": "node -e process.exit(3)"}}}}}
    )
    files[".gitignore"] = "node_modules/\n"
    repo.write(files)
    (repo.root / ".vx/cache").mkdir(parents=True)
    os.symlink(victim, repo.root / ".vx/cache/logs")
    repo.commit()
    res = repo.vx("run", "build", "--all", summary=False)
    assert res.code == 1, res.err
    assert sorted(p.name for p in victim.iterdir()) == [f"{i:03d}-app.log" for i in range(60)]
    assert all(p.read_text() == "precious" for p in victim.iterdir())
    assert "Traceback" not in res.err
