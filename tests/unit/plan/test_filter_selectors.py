"""`--filter` selectors (CLI-21, CLI-40): parsing and selecting over a workspace, pure."""

from __future__ import annotations

from pathlib import Path

import pytest

from vx.errors import UnknownTaskError, UsageError
from vx.model import ROOT_PROJECT, Package, ProjectConfig, Workspace
from vx.plan.filters import nothing_to_run, parse, select

#   @acme/ui <- @acme/web <- @acme/e2e        tools/lint (alone)
#   @acme/ui <- @acme/docs
DIRS = {
    ROOT_PROJECT: "",
    "@acme/ui": "packages/ui",
    "@acme/web": "apps/web",
    "@acme/docs": "apps/docs",
    "@acme/e2e": "apps/web/e2e",
    "lint": "tools/lint",
}
DEPS = {"@acme/web": ("@acme/ui",), "@acme/docs": ("@acme/ui",), "@acme/e2e": ("@acme/web",)}
WS = Workspace(
    Path("/ws"),
    "npm",
    {n: Package(n, d, DEPS.get(n, ()), f"{d}/package.json".lstrip("/")) for n, d in DIRS.items()},
)
CONFIGS = {
    n: ProjectConfig(source="x", tags=("frontend",) if n.startswith("@acme/w") else ())
    for n in DIRS
}


def sel(*texts: str, cwd: str = ROOT_PROJECT, cwd_rel: str = "") -> set[str]:
    return set(select([parse(t) for t in texts], WS, CONFIGS, cwd, cwd_rel))


@pytest.mark.feature("CLI-40")
@pytest.mark.parametrize(
    "texts, chosen",
    [
        (["@acme/web"], {"@acme/web"}),
        (["web"], {"@acme/web"}),  # scope-less: the one package with that name
        (["@acme/*"], {"@acme/ui", "@acme/web", "@acme/docs", "@acme/e2e"}),
        (["./apps"], {"@acme/web", "@acme/docs", "@acme/e2e"}),
        (["{apps/web}"], {"@acme/web", "@acme/e2e"}),  # the package there and those under it
        (["./apps/*"], {"@acme/web", "@acme/docs"}),  # `*` stays within one directory
        (["./apps/**"], {"@acme/web", "@acme/docs", "@acme/e2e"}),
        (["//"], {ROOT_PROJECT}),
        (["tag:front*"], {"@acme/web"}),
        (["web..."], {"@acme/web", "@acme/ui"}),
        (["web^..."], {"@acme/ui"}),
        (["...ui"], {"@acme/ui", "@acme/web", "@acme/docs", "@acme/e2e"}),
        (["...^ui"], {"@acme/web", "@acme/docs", "@acme/e2e"}),
        (["...web..."], {"@acme/web", "@acme/ui", "@acme/e2e"}),
        (["@acme/*", "!docs", "!e2e"], {"@acme/ui", "@acme/web"}),
        (
            ["!@acme/*"],
            {"lint"},
        ),  # excludes alone start from every package (the root project only by `//`)
        (["lint", "docs"], {"lint", "@acme/docs"}),
    ],
)
def test_forms(texts, chosen):
    assert sel(*texts) == chosen


@pytest.mark.feature("CLI-40")
def test_dot_and_relative_dirs_follow_the_cwd():
    assert sel(".", cwd="@acme/docs", cwd_rel="apps/docs") == {"@acme/docs"}
    assert sel("../web", cwd="@acme/docs", cwd_rel="apps/docs") == {"@acme/web", "@acme/e2e"}


@pytest.mark.feature("CLI-40")
@pytest.mark.parametrize("texts", [["@acme/wbe"], ["!@acme/wbe"], ["...wbe"], ["wbe[HEAD]"]])
def test_a_filter_naming_no_package_refuses_with_did_you_mean(texts):
    with pytest.raises(UnknownTaskError) as caught:
        sel(*texts)
    assert "no package named" in caught.value.message and "@acme/web" in (caught.value.hint or "")


@pytest.mark.feature("CLI-40")
def test_a_directory_filter_naming_no_directory_is_refused():
    with pytest.raises(UsageError) as caught:
        sel("./nowhere")
    assert "no directory `./nowhere`" in caught.value.message


@pytest.mark.feature("CLI-40")
@pytest.mark.parametrize("texts", [["web", "!@acme/*"], ["@nobody/*"], ["tag:nothing"]])
def test_a_filter_may_select_nothing(texts):
    assert sel(*texts) == set()  # as in turbo: the run has nothing to do, and says so


@pytest.mark.feature("CLI-40")
def test_the_line_an_empty_selection_says():
    assert nothing_to_run(["--filter=[HEAD^1]"], frozenset(), ["build"]) == (
        "nothing to run: --filter=[HEAD^1] selects no project"
    )
    assert "selects only the root project (//), which has no `build`" in nothing_to_run(
        ["--filter=...[HEAD^1]"], frozenset({ROOT_PROJECT}), ["build"]
    )
    assert "(a, b) has `lint`" in nothing_to_run(["a", "b"], frozenset({"a", "b"}), ["lint"])


@pytest.mark.feature("CLI-40")
@pytest.mark.parametrize(
    "text", ["", "...", "web^", "a...b...c", "[-x]", "[a..b]", "[main:file]", "!!web"]
)
def test_malformed_filters_are_refused(text):
    with pytest.raises(UsageError):
        parse(text)


@pytest.mark.feature("CLI-40")
def test_refs_parse_with_and_without_a_selector():
    assert parse("[origin/main]").since == "origin/main" and parse("[origin/main]").base == ""
    f = parse("...web...[HEAD~1]")
    assert (f.base, f.dependencies, f.dependents, f.since) == ("web", True, True, "HEAD~1")
