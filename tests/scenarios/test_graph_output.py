"""`vx run --graph[=file.dot]` (CLI-37): the plan as Graphviz DOT, coloured by predicted status."""

from __future__ import annotations

import re

import pytest
from support.workspace import build_task, npm_workspace


@pytest.mark.feature("CLI-37")
def test_the_graph_is_dot_with_status_colours_and_edges_and_runs_nothing(repo):
    ws = repo.write(
        npm_workspace(
            {
                "a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}},
                "b": {
                    "deps": ["a"],
                    "tasks": {"build": build_task(), "all": {"dependsOn": ["build"]}},
                    "files": {"src/b.js": "B;"},
                },
            }
        )
    ).commit()
    assert ws.vx("run", "build", "--all").code == 0
    (ws.root / "packages/b/src/b.js").write_text("B2;")
    result = ws.vx("run", "all", "--all", "--graph", summary=False)
    assert result.code == 0, result.err
    dot = result.out
    assert dot.startswith("digraph vx {") and dot.rstrip().endswith("}")
    fills = dict(re.findall(r'^  "([^"]+)" \[fillcolor="([a-z]+)"', dot, re.M))
    assert fills == {"a#build": "palegreen", "b#build": "orange", "b#all": "violet"}
    assert '"b#build" -> "a#build";' in dot and '"b#all" -> "b#build";' in dot
    assert (ws.root / "packages/b/dist/out.js").read_text() == "B;"  # nothing ran


@pytest.mark.feature("CLI-37")
def test_a_file_must_be_dot_and_is_written(repo):
    ws = repo.write(
        npm_workspace({"a": {"tasks": {"build": build_task()}, "files": {"src/a.js": "A;"}}})
    ).commit()
    refused = ws.vx("run", "build", "--graph=plan.svg", summary=False)
    assert refused.code == 2 and ".dot or .gv" in refused.err
    written = ws.vx("run", "build", "--graph=plan.dot", summary=False)
    assert written.code == 0 and written.out == ""
    assert (ws.root / "plan.dot").read_text().startswith("digraph vx {")
