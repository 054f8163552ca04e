"""The Nx project walk's reading of .gitignore (vx.workspace.nxprojects) against git's own answer
(`git check-ignore`), and when Nx analyses source imports (vx.config.nxinference), as Nx 21's
jsPluginConfig decides it."""

from __future__ import annotations

import subprocess

import pytest

from vx.config.nxinference import analyses_sources
from vx.workspace.nxprojects import _walk

ROOT_IGNORE = "node_modules\n/out\n**/build/\napps/*/dist\nlibs/**/gen\ntmp/\n!keep-tmp\ncache/**\n"
DIRS = [
    "out", "a/out", "libs/x/build", "build", "apps/web/dist", "apps/dist", "libs/a/b/gen",
    "libs/gen", "tmp", "a/tmp", "keep-tmp", "libs/n/dist", "libs/n/src", "libs/m/dist", "cache",
    "cache/sub", "src",
]  # fmt: skip


def test_the_walk_skips_what_git_ignores(tmp_path):
    (tmp_path / ".gitignore").write_text(ROOT_IGNORE)
    (tmp_path / "libs/n").mkdir(parents=True)
    (tmp_path / "libs/n/.gitignore").write_text("dist\n!src\n")
    for d in DIRS:
        (tmp_path / d).mkdir(parents=True, exist_ok=True)
        (tmp_path / d / "f.txt").write_text("x")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    _dirs, files = _walk(str(tmp_path))
    walked = {f.rpartition("/")[0] for f in files if f.endswith("f.txt")}
    paths = [f"{d}/f.txt" for d in DIRS]
    checked = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths], cwd=tmp_path, capture_output=True, text=True
    ).stdout.split()
    gits = {p.rpartition("/")[0] for p in paths if p not in checked}
    # walked: what git does not ignore; `cache/**` ignores cache's contents, not cache itself,
    # and only its subdirectories are left out (its own files are walked: too much, never too
    # little)
    assert walked - {"cache"} == gits
    assert "cache/sub" not in walked


@pytest.mark.parametrize(
    ("nx_json", "manifest", "analyses"),
    [
        ({}, {"devDependencies": {"@nx/js": "21"}}, True),
        ({}, {"dependencies": {"@nx/workspace": "21"}}, True),
        ({}, {"devDependencies": {"@nrwl/react": "16"}}, True),
        ({}, {"devDependencies": {"nx": "21"}}, False),
        ({}, None, False),
        ({"pluginsConfig": {"@nx/js": {}}}, {}, True),
        ({"pluginsConfig": {"@nx/js": {"analyzeSourceFiles": False}}}, {}, False),
        (
            {"pluginsConfig": {"@nx/js": {"analyzeSourceFiles": False}}},
            {"devDependencies": {"@nx/js": "21"}},
            False,
        ),
    ],
)
def test_nx_analyses_source_imports_as_nx_decides(nx_json, manifest, analyses):
    assert analyses_sources(nx_json, manifest) is analyses
