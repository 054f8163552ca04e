"""What a Turborepo team's CI job sees is what real turbo (2.11.11, pinned) would have it see: the
same exit for a selection with nothing in it, and the flags of `turbo run` accepted with turbo's
meaning or refused with the reason. The real turbo runs beside vx on the same repository."""

from __future__ import annotations

import pytest
from support.turbo import small_turborepo, turbo, turbo_binary


@pytest.fixture(scope="module")
def turbo_bin() -> str:
    return turbo_binary()


@pytest.fixture
def touched_readme(repo):
    """The small Turborepo on `main`, then a branch whose one commit touches only README.md."""
    repo.write(small_turborepo()).commit("init")
    repo.git("checkout", "-q", "-b", "feature")
    repo.write({"README.md": "# the repo, edited\n"}).commit("readme")
    return repo


@pytest.mark.feature("CLI-40")
@pytest.mark.parametrize(
    "args",
    [
        ["--filter=...[HEAD^1]"],  # the CI line of the README, after a README-only commit
        ["--filter=[HEAD^1]"],
        ["--filter=//"],  # only the root, which has no build
        ["--filter=a[HEAD^1]"],
        ["--filter=@nobody/*"],  # a glob that matches no name
        ["--filter=!a", "--filter=!b"],  # excludes that remove everything
        ["--affected"],  # against main: only README.md changed
    ],
)
def test_a_selection_with_nothing_in_it_exits_0_as_in_turbo(touched_readme, turbo_bin, args):
    oracle = turbo(touched_readme, turbo_bin, "run", "build", *args)
    assert oracle.code == 0 and "No tasks were executed" in oracle.out + oracle.err, oracle
    result = touched_readme.vx("run", "build", *args)
    assert result.code == 0, result.err
    assert result.summary is not None and result.summary["tasks"] == []
    said = [line for line in result.err.splitlines() if line.startswith("vx: nothing")]
    assert len(said) == 1, result.err  # one line saying so
    assert not (touched_readme.root / "packages/a/dist").exists()


@pytest.mark.feature("CLI-40")
@pytest.mark.parametrize(
    "args, said",
    [
        (["build", "--filter=nope"], "no package named `nope`"),
        (["build", "--filter=!nope"], "no package named `nope`"),
        (["build", "--filter=...nope[HEAD^1]"], "no package named `nope`"),
        (["build", "--filter=./nowhere"], "no directory `./nowhere`"),
        (["nosuch", "--filter=a"], "no project declares a task named `nosuch`"),
    ],
)
def test_a_filter_naming_what_does_not_exist_is_refused_as_in_turbo(
    touched_readme, turbo_bin, args, said
):
    oracle = turbo(touched_readme, turbo_bin, "run", *args)
    assert oracle.code != 0, oracle  # turbo says 1; vx's refusals exit 2 (docs/cli.md)
    result = touched_readme.vx("run", *args)
    assert result.code == 2 and said in result.err, result.err
    assert "Traceback" not in result.err
