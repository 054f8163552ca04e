"""docs/plugins.md runs as written: every example plugin on the page, declared in a workspace
with one cached `build` task (and an unlisted tools/gen project), loads and runs the command its
first line names, and prints what that line expects."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.workspace import build_task, npm_workspace

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"
BLOCK = re.compile(
    r"```python\n(# file: (\w+)\.py · run: vx ([^\n·]+?)(?: · expect: ([^\n]+))?\n.*?)```", re.S
)
EXAMPLES = BLOCK.findall(DOC.read_text())


def test_the_page_has_an_example_of_every_hook():
    from vx.plugins.host import HOOKS

    shown = {m for code, *_ in EXAMPLES for m in re.findall(r'return \{"(\w+)"', code)}
    shown |= {m for code, *_ in EXAMPLES for m in re.findall(r'"(\w+)": \w+[,}]', code)}
    assert set(HOOKS) <= shown, sorted(set(HOOKS) - shown)


@pytest.mark.feature("PL-13")
@pytest.mark.parametrize("code,module,command,expect", EXAMPLES, ids=[e[1] for e in EXAMPLES])
def test_each_example_on_the_page_runs(repo, tmp_path, code, module, command, expect):
    """Each plugin example in the docs runs unchanged in a real workspace (issue: plugins,
    examples kept runnable)."""
    pkgs = {"app": {"tasks": {"build": build_task(deps=())}, "files": {"src/a.js": "A;"}}}
    repo.write(npm_workspace(pkgs))
    gen = {"tasks": {"build": {"exec": {"command": "echo generating"}}}}
    repo.write({"tools/gen/vx.config.json": gen})  # no package manager lists it
    repo.write({f"{module}.py": code, "vx.workspace.json": {"plugins": [module]}}).commit()
    env = {"VX_SHELF": str(tmp_path / "shelf")}  # the cache example's directory, this test's own
    result = repo.vx(*command.split(), summary=False, env=env)
    assert result.code == 0, result.err
    assert "warning" not in result.err and "failed" not in result.err, result.err
    if expect:
        assert expect in result.out + result.err
    if command == "run build":  # and the cached task hits the second time
        again = repo.vx(*command.split(), summary=False, env=env)
        assert again.code == 0 and "1 cached" in again.err, again.err
