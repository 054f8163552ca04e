"""The glob grammar (KEY-16): refusals, normal form, matching, roots and pruning."""

from __future__ import annotations

import pytest

from vx.errors import UsageError
from vx.files.globs import GlobSet, glob_error, normalise

# ---------------------------------------------------------------- KEY-16 refusals


@pytest.mark.feature("KEY-16")
@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        ("", "empty"),
        ("/etc/passwd", "absolute"),
        ("!/abs", "absolute"),
        ("../x", "`..`"),
        ("src/../../x", "`..`"),
        ("src\\a.ts", "backslash"),
        ("C:/src", "drive letter"),
        ("c:src", "drive letter"),
        (".", "`.` alone"),
        ("./", "`.` alone"),
        ("@(a|b)", "extglob"),
        ("!(a|b)", "extglob"),
        ("src/+(a|b).ts", "extglob"),
        ("src/*(a|b).ts", "extglob"),
        ("src/?(a|b).ts", "extglob"),
        ("{a}", "one alternative"),
        ("src/{x}/*.ts", "one alternative"),
        ("{}", "one alternative"),
        ("{a,b", "unbalanced"),
        ("a,b}", "unbalanced"),
        ("$TURBO_DEFAULT$", "Turborepo"),
        ("$TURBO_ROOT$/x", "workspaceFiles"),
        ("{projectRoot}/src/**", "Nx"),
        ("^production", "Nx"),
        ("!!x", "double negation"),
        ("!", "negates nothing"),
    ],
)
def test_refusals_carry_a_reason_and_hint(pattern, says):
    reason = glob_error(pattern)
    assert reason is not None and says in reason
    with pytest.raises(UsageError):
        GlobSet([pattern])


@pytest.mark.feature("KEY-16")
def test_refusal_hints_point_somewhere():
    assert "**/*" in glob_error("$TURBO_DEFAULT$")
    assert "{a,b}" in glob_error("@(a|b)")
    assert "write `x` or `!x`" in glob_error("!!x")


@pytest.mark.feature("KEY-16")
def test_brace_explosion_is_refused():
    assert "alternatives" in glob_error("{a,b}" * 9)


@pytest.mark.feature("KEY-16")
@pytest.mark.parametrize(
    "pattern",
    [
        "src/**",
        "!dist",
        "./a//b/",
        "{a,b}",
        "{a,{b,c}}",
        "[id].tsx",
        "app/(group)/page.tsx",
        "!./(g)/x",
        "**",
        "a?c",
    ],
)
def test_accepted(pattern):
    assert glob_error(pattern) is None


@pytest.mark.feature("KEY-16")
@pytest.mark.parametrize(
    ("raw", "norm"),
    [
        ("./src/a.ts", "src/a.ts"),
        ("src/./a", "src/a"),
        ("src//a", "src/a"),
        ("dist/", "dist"),
        ("!./dist/", "!dist"),
        ("a/**/**/b", "a/**/b"),
        ("././x", "x"),
    ],
)
def test_normalise(raw, norm):
    assert normalise(raw) == norm


@pytest.mark.feature("KEY-16")
def test_spellings_match_alike():
    assert GlobSet(["./src//"]).matches("src/a.ts")
    assert GlobSet(["src/"]).matches("src/a.ts")


# ---------------------------------------------------------------- matching


@pytest.mark.feature("KEY-16")
def test_literal_is_file_or_tree():
    g = GlobSet(["src", "package.json"])
    assert g.matches("src") and g.matches("src/a.ts") and g.matches("src/x/y/z.ts")
    assert g.matches("package.json")
    assert not g.matches("srcx/a.ts") and not g.matches("src.ts") and not g.matches("package.jsonx")


@pytest.mark.feature("KEY-16")
def test_star_stays_in_segment_and_doublestar_spans_zero_or_more():
    g = GlobSet(["src/*.ts"])
    assert g.matches("src/a.ts") and not g.matches("src/x/a.ts")
    d = GlobSet(["src/**/*.ts"])
    assert d.matches("src/a.ts") and d.matches("src/x/y/a.ts") and not d.matches("lib/a.ts")
    assert GlobSet(["**/*.md"]).matches("README.md") and GlobSet(["**/*.md"]).matches("a/b/c.md")
    assert GlobSet(["a/**"]).matches("a") and GlobSet(["a/**"]).matches("a/b/c")
    assert GlobSet(["a/**/b"]).matches("a/b") and GlobSet(["a/**/b"]).matches("a/x/y/b")


@pytest.mark.feature("KEY-16")
def test_question_mark_is_one_character():
    g = GlobSet(["a?.ts"])
    assert g.matches("ab.ts") and not g.matches("a.ts") and not g.matches("a/.ts")


@pytest.mark.feature("KEY-16")
def test_braces_nest():
    g = GlobSet(["{src,lib/{a,b}}/*.js"])
    assert g.matches("src/x.js") and g.matches("lib/a/x.js") and g.matches("lib/b/x.js")
    assert not g.matches("lib/c/x.js")


@pytest.mark.feature("KEY-16")
def test_bracket_is_literal():
    g = GlobSet(["pages/[id].tsx"])
    assert g.matches("pages/[id].tsx")
    assert not g.matches("pages/i.tsx") and not g.matches("pages/d.tsx")


@pytest.mark.feature("KEY-16")
def test_negation_applies_wherever_it_sits():
    for patterns in (["src/**", "!src/gen/**"], ["!src/gen/**", "src/**"]):
        g = GlobSet(patterns)
        assert g.matches("src/a.ts") and not g.matches("src/gen/a.ts")


@pytest.mark.feature("KEY-16")
def test_negated_literal_takes_back_a_tree():
    g = GlobSet(["**/*", "!fixtures"])
    assert g.matches("src/a.ts") and not g.matches("fixtures/x/y.json") and g.matches("fixturesx")


@pytest.mark.feature("KEY-16")
def test_wildcards_match_dotfiles():
    assert GlobSet(["src/**"]).matches("src/.env") and GlobSet(["*"]).matches(".eslintrc")


def test_only_negations_match_nothing():
    g = GlobSet(["!dist"])
    assert not g.matches("src/a.ts") and not g and g.roots() == ()


def test_empty_set_matches_nothing():
    assert not GlobSet([]).matches("a") and GlobSet([]).roots() == ()


# ---------------------------------------------------------------- walking aids


def test_roots_are_literal_heads_deduplicated():
    assert GlobSet(["src/**/*.ts", "src/x/*.js", "package.json", "!lib"]).roots() == (
        "package.json",
        "src",
    )
    assert GlobSet(["{a,b/c}/*.js"]).roots() == ("a", "b/c")
    assert GlobSet(["*.ts", "src/**"]).roots() == ("",)


def test_wildcard_roots_are_kept_dirs():
    assert GlobSet(["dist/**", "out", "types/*.d.ts"]).wildcard_roots() == ("dist", "types")


def test_could_match_under_prunes():
    g = GlobSet(["src/**/*.ts", "!src/gen/**", "lib/*.js", "docs"])
    assert g.could_match_under("") and g.could_match_under("src") and g.could_match_under("src/x/y")
    assert not g.could_match_under("src/gen") and not g.could_match_under("src/gen/deep")
    assert g.could_match_under("lib") and not g.could_match_under("lib/sub")
    assert g.could_match_under("docs/a/b")
    assert not g.could_match_under("test") and not g.could_match_under("node_modules")


def test_names_detects_a_named_segment():
    assert GlobSet(["node_modules/.cache/**"]).names("node_modules")
    assert not GlobSet(["**/*"]).names("node_modules")


@pytest.mark.feature("KEY-23")
def test_unmatched_lists_positive_patterns_as_written():
    g = GlobSet(["./src/**", "docs/*.md", "!src/gen"])
    assert g.unmatched(["src/a.ts"]) == ("docs/*.md",)
    assert GlobSet(["src/**"]).unmatched([]) == ("src/**",)


def test_matching_a_large_listing_is_exact():
    """10^5 paths through a realistic set: every one matched (speed is measured in bench/, not here)."""
    g = GlobSet(["src/**/*.ts", "!src/gen", "lib", "{a,b/{c,d}}/*.js", "[id].tsx", "**/*.md"])
    paths = [f"src/d{i % 50}/f{i}.ts" for i in range(100_000)]
    assert sum(map(g.matches, paths)) == 100_000
    assert not any(map(g.matches, [f"src/gen/f{i}.ts" for i in range(100)]))


# ---------------------------------------------------------------- turbo's globs, ignored files (KEY-18)


@pytest.mark.feature("KEY-18")
@pytest.mark.parametrize(
    "pattern, path, turbo, vx",
    [
        ("src/**/*.[jt]s", "src/a/b.ts", True, False),
        ("src/**/*.[jt]s", "src/a/b.css", False, False),
        ("src/[!a]*.ts", "src/b.ts", True, False),
        ("src/[!a]*.ts", "src/a.ts", False, False),
        ("src/[^a]*.ts", "src/b.ts", True, False),
        ("src/[id].tsx", "src/[id].tsx", False, True),  # vx's `[` is literal: Next.js routes
        ("src/[id].tsx", "src/i.tsx", True, False),
        ("a[/]b", "a/b", False, False),  # a class never spans a directory
        ("{conf,cfg}/*.[jt]son", "cfg/x.json", True, False),
    ],
)
def test_turbo_globs_have_character_classes_vx_globs_do_not(pattern, path, turbo, vx):
    assert GlobSet([pattern], turbo=True).matches(path) is turbo
    assert GlobSet([pattern]).matches(path) is vx


@pytest.mark.feature("KEY-18")
@pytest.mark.parametrize(
    "patterns, entry, reached",
    [
        (["**"], ".env", False),
        (["**"], "dist", False),
        (["src/**"], "src/generated", False),
        (["**/*.ts"], "src/x.ts", False),
        ([".env*"], ".env", True),
        ([".env"], ".env", True),
        (["config/*.local"], "config/db.local", True),
        (["dist/**"], "dist", True),
        (["dist/esm/*.js"], "dist", True),
        (["src/generated/**"], "src/generated", True),
        (["dist/**"], "coverage", False),
        (["*/**"], "node_modules", False),  # node_modules only when spelt
        (["node_modules/x/**"], "node_modules", True),
    ],
)
def test_an_ignored_entry_is_reached_by_the_glob_part_before_its_first_double_star(
    patterns, entry, reached
):
    assert (GlobSet(patterns).toward(entry) is not None) is reached


@pytest.mark.feature("KEY-18")
def test_turbo_globs_reach_every_ignored_entry_but_node_modules():
    assert GlobSet(["**"], turbo=True).toward("dist") is not None
    assert GlobSet(["src/**"], turbo=True).toward("src/generated") is not None
    assert GlobSet(["**"], turbo=True).toward("node_modules") is None


@pytest.mark.feature("KEY-18")
def test_toward_keeps_only_the_reaching_patterns_and_every_negation():
    part = GlobSet(["**", "dist/x.js", "!dist/y.js"]).toward("dist")
    assert part is not None and part.matches("dist/x.js") and not part.matches("dist/z.js")
