"""The bundled example (README's first command) builds, hits, and declares what it reads."""

import shutil
from pathlib import Path

import pytest
from support.commands import needs
from support.workspace import Repo

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "basic"


@pytest.fixture
def example(tmp_path) -> Repo:
    root = tmp_path / "basic"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".vx", "dist", "node_modules"))
    return Repo(root).commit("example")


def test_check_runs_then_hits(example):
    first = example.vx("run", "check")
    assert first.code == 0, first.err
    assert len(first.summary["tasks"]) == 12
    second = example.vx("run", "check")
    assert {t["cache"] for t in second.summary["tasks"]} == {"up-to-date"}


@pytest.mark.feature("LG-03")
@needs("strace")
def test_every_task_declares_what_it_reads(example):  # on our own example
    res = example.vx("run", "check", "--verify=inputs")
    assert res.code == 0, res.out + res.err
    assert "every traced task declared what it read" in res.out + res.err


TURBO_EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "turbo"


@pytest.mark.feature("TL-05")
def test_the_turbo_example_runs_as_it_is_then_hits(tmp_path):  # on our own example
    root = tmp_path / "turbo"
    shutil.copytree(
        TURBO_EXAMPLE, root, ignore=shutil.ignore_patterns(".vx", "dist", "node_modules", ".turbo")
    )
    example = Repo(root).commit("example")
    first = example.vx("run", "test", "lint")
    assert first.code == 0, first.err
    assert (
        len(first.summary["tasks"]) == 9
    )  # build, test and lint of three packages; no vx config anywhere
    second = example.vx("run", "test", "lint")
    assert {t["cache"] for t in second.summary["tasks"]} == {"up-to-date"}
