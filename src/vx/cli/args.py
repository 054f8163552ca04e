"""One flag parser for every verb; each verb declares its flags in `vx.cli.main.VERBS`.

A flag takes no value (FLAG), a value (VALUE: `--name v` or `--name=v`), a value only after `=`
(OPTIONAL: `--dry` alone means the default), a repeatable value (LIST), or is a switch that may
be spelt out (BOOL: `--force`, `--force=true`, `--force=false`, as turbo's `[BOOL]` flags). Aliases map to the
flag they stand for (`-F` is `--filter`). An unknown flag is refused with the nearest known one,
and a flag given beside one it conflicts with by what its verb declares. What a verb says
besides its output goes to stderr through `say`.
"""

from __future__ import annotations

import sys
from typing import Any, Mapping, Sequence

from vx.errors import UsageError, did_you_mean

FLAG, VALUE, OPTIONAL, LIST, BOOL = "flag", "value", "optional", "list", "bool"
Flags = Mapping[str, tuple[str, str]]  # `--name` -> (kind, attribute of Args)
# `--name` -> (the flags it cannot go with, what the refusal says, its hint), checked in order
Conflicts = Mapping[str, tuple[tuple[str, ...], str, str]]


class Args:
    """A parsed line: `names` (the positional words), `forward` (what followed `--`, for a verb
    that forwards) and one attribute per flag: False / None / [] when it was not given. A plain
    namespace, so that `vx --version` builds no record type."""

    def __init__(self, flags: Flags) -> None:
        self.names: list[str] = []
        self.forward: list[str] = []
        for kind, dest in flags.values():
            setattr(self, dest, [] if kind == LIST else False if kind in (FLAG, BOOL) else None)

    def __getattr__(self, name: str) -> Any:  # only for the type checker: every dest is set above
        raise AttributeError(name)

    def __setattr__(
        self, name: str, value: Any
    ) -> None:  # a verb may settle a flag (run-many: --all)
        object.__setattr__(self, name, value)


def parse(
    verb: str,
    tokens: Sequence[str],
    flags: Flags,
    aliases: Mapping[str, str] | None = None,
    forwards: bool = False,
) -> Args:
    """Parse the words after `vx <verb>`: optional values only after `=`, unknown flags refused.
    With `forwards`, everything after `--` is kept as it is."""
    out = Args(flags)
    aliases = aliases or {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok == "--" and forwards:
            out.forward = list(tokens[i:])
            break
        if not tok.startswith("-") or tok == "-":
            out.names.append(tok)
            continue
        name, eq, value = tok.partition("=")
        name = aliases.get(name, name)
        if name not in flags:
            near = did_you_mean(name, flags)
            hint = f"did you mean `{near}`?" if near else f"see `vx help {verb.split()[0]}`"
            if forwards:  # `nx run app:build --level=7`: to vx, the task's arguments follow `--`
                hint += f" A task's own arguments go after `--`: `vx {verb} … -- {tok}`"
            raise UsageError(f"unknown flag `{name}` for `vx {verb}`", hint=hint)
        kind, dest = flags[name]
        if kind == FLAG:
            if eq:
                raise UsageError(f"`{name}` takes no value", hint=f"write `{name}` alone")
            setattr(out, dest, True)
        elif kind == BOOL:
            if eq and value.lower() not in ("true", "false"):
                raise UsageError(
                    f"`{name}={value}`: the value is true or false",
                    hint=f"write `{name}` (or `{name}=false` to leave it off)",
                )
            setattr(out, dest, not eq or value.lower() == "true")
        elif kind == OPTIONAL:
            setattr(out, dest, value if eq else "")
        else:
            if not eq:
                if i >= len(tokens) or tokens[i].startswith("-"):
                    raise UsageError(
                        f"`{name}` needs a value", hint=f"write `{name} VALUE` or `{name}=VALUE`"
                    )
                value = tokens[i]
                i += 1
            if value == "":
                raise UsageError(f"`{name}` needs a value", hint=f"write `{name}=VALUE`")
            if kind == LIST:
                getattr(out, dest).append(value)
            else:
                setattr(out, dest, value)
    return out


def one_of(flag: str, value: str | None, choices: Sequence[str], default: str) -> str:
    """A flag's value that must be one of `choices` (`--format text|json`), `default` when absent."""
    if value is None:
        return default
    if value not in choices:
        raise UsageError(
            f"{flag}: `{value}` is neither {' nor '.join(choices)}", hint=f"{flag} {choices[-1]}"
        )
    return value


def given(args: Args, flags: Flags, flag: str) -> bool:
    """Whether `flag` was on the line (an optional flag given bare is given)."""
    kind, dest = flags[flag]
    value = getattr(args, dest)
    return bool(value) if kind in (FLAG, LIST, BOOL) else value is not None


def refuse_conflicts(args: Args, flags: Flags, conflicts: Conflicts) -> None:
    """Refuse the first flag of `conflicts` given beside one it cannot go with."""
    for flag, (others, message, hint) in conflicts.items():
        if given(args, flags, flag) and any(given(args, flags, other) for other in others):
            raise UsageError(message, hint=hint)


def say(text: str) -> None:
    """A line on stderr, for what a verb says besides its output; a closed pipe is no error."""
    try:
        print(text, file=sys.stderr)
    except BrokenPipeError:
        pass


def warning(message: str) -> None:
    say(f"vx: warning: {message}")
