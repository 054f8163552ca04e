"""docs/plugins.md runs as written: every example plugin on the page, declared in a workspace
with one cached `build` task, loads and runs the command its first line names, and prints what
that line expects."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import build_task, npm_workspace

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"
BLOCK = re.compile(
    r"```python\n(# file: (\w+)\.py · run: vx ([^\n·]+?)(?: · expect: ([^\n]+))?\n.*?)```", re.S
)
EXAMPLES = BLOCK.findall(DOC.read_text())


def test_the_page_has_an_example_of_every_hook_it_supports():
    from vx.plugins.host import HOOKS, NOT_YET

    shown = {m for code, *_ in EXAMPLES for m in re.findall(r'return \{"(\w+)"', code)}
    shown |= {m for code, *_ in EXAMPLES for m in re.findall(r'"(\w+)": \w+[,}]', code)}
    assert set(HOOKS) - set(NOT_YET) <= shown, sorted(set(HOOKS) - set(NOT_YET) - shown)


@pytest.mark.feature("PL-13")
@pytest.mark.parametrize("code,module,command,expect", EXAMPLES, ids=[e[1] for e in EXAMPLES])
def test_each_example_on_the_page_runs(repo, code, module, command, expect):
    """Each plugin example in the docs runs unchanged in a real workspace (issue: plugins,
    examples kept runnable)."""
    pkgs = {"app": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A;"}}}
    repo.write(npm_workspace(pkgs))
    repo.write({f"{module}.py": code, "vx.workspace.json": {"plugins": [module]}}).commit()
    result = repo.vx(*command.split(), summary=False)
    assert result.code == 0, result.err
    assert "plugin" not in result.err, result.err  # no plugin warned or failed
    if expect:
        assert expect in result.out + result.err
    if command.startswith("run"):
        again = repo.vx(*command.split(), summary=False)
        assert again.code == 0 and "1 cached" in again.err, again.err
