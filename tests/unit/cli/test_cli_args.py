"""The one flag parser (vx.cli.args) and the verb table the help texts and completions come from."""

from __future__ import annotations

import re

import pytest

from vx.cli.args import parse
from vx.cli.main import FOREIGN_FLAGS, VERBS
from vx.errors import UsageError

FLAGS = {
    "--format": ("value", "format"),
    "--dry": ("optional", "dry"),
    "--all": ("flag", "all"),
    "--filter": ("list", "filters"),
}


@pytest.mark.parametrize("tokens", [["--format", "json"], ["--format=json"]])
def test_a_value_is_taken_with_a_space_or_an_equals_sign(tokens):
    assert parse("show", tokens, FLAGS).format == "json"


def test_flags_take_their_kind_of_value_and_the_rest_are_names():
    args = parse(
        "run",
        ["build", "--all", "--dry", "-F", "a", "--filter=b", "--", "--all", "x"],
        FLAGS,
        {"-F": "--filter"},
        forwards=True,
    )
    assert (args.names, args.all, args.dry, args.filters, args.forward) == (
        ["build"],
        True,
        "",
        ["a", "b"],
        ["--all", "x"],
    )
    assert parse("run", ["--dry=json"], FLAGS).dry == "json"
    untouched = parse("run", [], FLAGS)
    assert (untouched.all, untouched.dry, untouched.filters, untouched.format) == (
        False,
        None,
        [],
        None,
    )


@pytest.mark.parametrize(
    "tokens, message",
    [
        (["--formt", "json"], "unknown flag `--formt` for `vx show`"),
        (["--format"], "`--format` needs a value"),
        (["--format", "--all"], "`--format` needs a value"),
        (["--format="], "`--format` needs a value"),
        (["--all=yes"], "`--all` takes no value"),
        (["--", "x"], "unknown flag `--` for `vx show`"),  # only a verb that forwards takes `--`
    ],
)
def test_bad_flags_are_refused_by_name(tokens, message):
    with pytest.raises(UsageError) as caught:
        parse("show", tokens, FLAGS)
    assert caught.value.message == message


def test_an_unknown_flag_is_answered_with_the_nearest_one():
    with pytest.raises(UsageError) as caught:
        parse("show", ["--formt"], FLAGS)
    assert caught.value.hint == "did you mean `--format`?"


# Flags of other tools a help text quotes (`npm run build --workspaces`): not vx's.
OTHER_TOOLS_FLAGS = {"init": {"--workspaces"}}


@pytest.mark.parametrize("name", sorted(VERBS))
def test_a_verbs_help_names_exactly_the_flags_it_takes(name):
    """The table is the truth; the help text must agree with it, so neither drifts."""
    verb = VERBS[name]
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[A-Za-z])\b", verb.help)) - {"--help"}
    named -= OTHER_TOOLS_FLAGS.get(name, set())
    if verb.flags is VERBS["run"].flags:
        named -= set(FOREIGN_FLAGS)  # turbo's and Nx's flags vx answers with what to write instead
    if verb.refused:  # `vx watch [RUN OPTIONS]`: its help names what it refuses of run's flags
        assert named == set(verb.refused) and verb.flags is VERBS["run"].flags
    elif name != "run" and verb.flags is VERBS["run"].flags:  # Nx's verbs: `vx help run` lists them
        assert named <= set(verb.flags) | set(verb.aliases), name
    else:
        assert named == set(verb.flags) - {"--help"} | set(verb.shown), name


def test_completions_offer_the_table_less_what_a_verb_refuses():
    assert "--dry" in VERBS["run"].completions() and "--dry" not in VERBS["watch"].completions()
    assert set(VERBS["watch"].completions()) == set(VERBS["run"].completions()) - {
        "--dry",
        "--graph",
        "--summarize",
        "--ui",
        "--keep-ui",
        "--format",
        "--cwd",
    }
    assert VERBS["why"].completions() == ["--format", "--help", "--run"]


@pytest.mark.feature("TL-05")
@pytest.mark.parametrize(
    "tokens, value",
    [([], False), (["--force"], True), (["--force=true"], True), (["--force=False"], False)],
)
def test_a_turbo_switch_may_spell_out_its_value(tokens, value):
    assert parse("run", tokens, {"--force": ("bool", "force")}).force is value


def test_a_turbo_switch_takes_true_or_false_only():
    with pytest.raises(UsageError) as caught:
        parse("run", ["--force=yes"], {"--force": ("bool", "force")})
    assert "true or false" in caught.value.message


@pytest.mark.feature("TL-05")
def test_the_token_is_scrubbed_from_the_line_a_run_keeps():
    from vx.cli.run import scrubbed

    line = [
        "run",
        "build",
        "--token",
        "s3cret",
        "--token=s3cret",
        "--team",
        "t",
        "--",
        "--token",
        "x",
    ]
    assert scrubbed(line) == [
        "run", "build", "--token", "***", "--token=***", "--team", "t", "--", "--token", "x"
    ]  # fmt: skip
