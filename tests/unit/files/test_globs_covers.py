"""GlobSet.covers: the lister's shortcut must never admit a path the set would refuse (KEY-16)."""

import pytest

from vx.files.globs import GlobSet

PATHS = [
    "src",
    "src/a.js",
    "src/b/c.ts",
    "src/.dot",
    "src/x",
    "src/b/.d/e",
    "lib/a",
    "package.json",
    "package.json/odd",
    "a.ts",
    "x/src/a",
    ".hidden/a",
]
ROOTS = ["", "src", "src/b", "lib", "package.json", ".hidden", "s", "x"]
PATTERNS = [
    ["src/**"],
    ["src/**", "package.json"],
    ["src/*.js"],
    ["**"],
    ["**/*.ts"],
    ["src"],
    ["src/**", "!src/x"],
    ["{src,lib}/**"],
    ["src/**/x"],
    ["s*/**"],
    [".hidden/**"],
    ["src/**/*"],
]


@pytest.mark.parametrize("patterns", PATTERNS, ids=lambda p: ",".join(p))
def test_covers_implies_every_path_below_matches(patterns):
    globs = GlobSet(patterns)
    for root in ROOTS:
        if globs.covers(root):
            below = [p for p in PATHS if not root or p == root or p.startswith(root + "/")]
            assert [p for p in below if not globs.matches(p)] == [], (patterns, root)


def test_covers_the_common_shapes_and_refuses_negations():
    assert GlobSet(["src/**", "package.json"]).covers("src")
    assert GlobSet(["src/**", "package.json"]).covers("package.json")
    assert not GlobSet(["src/*.js"]).covers("src")
    assert not GlobSet(["src/**", "!src/x"]).covers("src")  # a negation may take any path back
    assert GlobSet(["**"]).covers("")
