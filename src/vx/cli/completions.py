"""`vx completions bash|zsh|fish`: a completion script for the shell, derived from vx's
verb table (`vx.cli.main.VERBS`) — every verb, and every flag it declares — so it never falls behind.
Task names are not completed (they depend on the directory and would need a vx start per TAB).
"""

from __future__ import annotations

from typing import Mapping

from vx.errors import UsageError

SHELLS = ("bash", "zsh", "fish")


def script(shell: str, flags: Mapping[str, list[str]]) -> str:
    """The script for `shell`; `flags` maps each verb to the flags it completes."""
    if shell not in SHELLS:
        raise UsageError(
            f"`{shell}` is not a shell vx completes", hint=f"one of: {', '.join(SHELLS)}"
        )
    verbs = sorted(flags)
    return {"bash": _bash, "zsh": _zsh, "fish": _fish}[shell](verbs, flags)


def _bash(verbs: list[str], flags: Mapping[str, list[str]]) -> str:
    cases = "\n".join(f'        {verb}) opts="{" ".join(flags[verb])}" ;;' for verb in verbs)
    return f"""# vx completions for bash: eval "$(vx completions bash)"
_vx() {{
    local cur verb opts
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    if [ "$COMP_CWORD" -eq 1 ]; then
        COMPREPLY=($(compgen -W "{" ".join(verbs)} --version --help" -- "$cur"))
        return
    fi
    verb="${{COMP_WORDS[1]}}"
    case "$verb" in
{cases}
        *) opts="" ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}}
complete -F _vx vx
"""


def _zsh(verbs: list[str], flags: Mapping[str, list[str]]) -> str:
    cases = "\n".join(f"    {verb}) compadd -- {' '.join(flags[verb])} ;;" for verb in verbs)
    return f"""#compdef vx
# vx completions for zsh: source <(vx completions zsh)
_vx() {{
  if (( CURRENT == 2 )); then
    compadd -- {" ".join(verbs)} --version --help
    return
  fi
  if [[ "$PREFIX" == -* ]]; then
    case "$words[2]" in
{cases}
    esac
  else
    _files
  fi
}}
compdef _vx vx
"""


def _fish(verbs: list[str], flags: Mapping[str, list[str]]) -> str:
    lines = [
        "# vx completions for fish: vx completions fish | source",
        "complete -c vx -f",
        f"complete -c vx -n __fish_use_subcommand -a '{' '.join(verbs)}'",
    ]
    for verb in verbs:
        for flag in flags[verb]:
            option = f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"
            lines.append(f"complete -c vx -n '__fish_seen_subcommand_from {verb}' {option}")
    return "\n".join(lines) + "\n"
