"""The JSON Schemas vx ships (src/vx/schemas), checked with the `jsonschema` library: `validate`
one document against one schema, and `check_output` / `check_summary`, which the harness calls
on every JSON product a vx under test prints or writes, so each scenario that asks for JSON
holds the output to its schema."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Sequence

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Resource

from vx.cli.main import wants_json  # which command lines print JSON: vx decides it there

SCHEMAS = Path(__file__).resolve().parents[3] / "src" / "vx" / "schemas"
PREFIX = "vx/schemas/"  # each schema's $id; a `$ref` to a sibling resolves against it


@cache
def _registry() -> Registry:
    resources = []
    for path in sorted(SCHEMAS.glob("*.json")):
        schema = json.loads(path.read_text())
        assert schema.get("$id") == PREFIX + path.name, f"{path.name}: $id {schema.get('$id')}"
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


@cache
def validator(name: str) -> Draft202012Validator:
    schema = _registry().contents(PREFIX + name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=_registry())


def problems(doc, name: str) -> list[str]:
    """What in `doc` breaks the schema `name` (e.g. `run.json`), one line each; [] when nothing."""
    return [
        f"{'$' + ''.join(f'[{p!r}]' for p in e.absolute_path)}: {e.message}"
        for e in sorted(validator(name).iter_errors(doc), key=lambda e: list(e.absolute_path))
    ]


def validate(doc, name: str, what: str = "") -> None:
    """Fail the test, with the validator's message, unless `doc` conforms to the schema `name`."""
    errors = list(validator(name).iter_errors(doc))
    if errors:
        best = best_match(errors)
        where = "$" + "".join(f"[{p!r}]" for p in best.absolute_path)
        raise AssertionError(
            f"{what or 'the document'} breaks {name} at {where}: {best.message}\n"
            + "\n".join(problems(doc, name)[:20])
        )


# ---------------------------------------------------------------- which product a command prints

RUN_VERBS = ("run", "run-many", "affected")


def _words(argv: Sequence[str]) -> list[str]:
    return list(argv[: list(argv).index("--")] if "--" in argv else argv)


def product(argv: Sequence[str]) -> str | None:
    """The schema of what `vx ARGV` prints on stdout when it does not refuse; None when it prints
    no JSON (or a verb whose output has no schema)."""
    words = _words(argv)
    if not wants_json(words) or not words:
        return None
    verb = words[0]
    if verb in RUN_VERBS:
        dry = any(w in ("--dry=json", "--dry-run=json") for w in words)
        return "plan.json" if dry else "run.json"
    if verb in ("show", "ls"):
        if "--json" in words:
            return "nx-projects.json" if words[1:2] == ["projects"] else "nx-project.json"
        return "show.json"
    if verb == "last":
        return (
            "runs.json"
            if any(w == "--list" or w.startswith("--list=") for w in words)
            else "run.json"
        )
    return {
        "why": "why.json",
        "history": "history.json",
        "info": "info.json",
        "cache": "cache.json",
    }.get(verb)


def check_output(argv: Sequence[str], stdout: str) -> None:
    """Validate what `vx ARGV` printed when it asked for JSON: a refusal against error.json, else
    the verb's product against its schema. Nothing printed (a verb with nothing to say, or one
    killed before it printed) is left to the test."""
    if not wants_json(argv) or not stdout.strip():
        return
    try:
        doc = json.loads(stdout)
    except ValueError as exc:
        raise AssertionError(f"`vx {' '.join(argv)}` printed no JSON ({exc}):\n{stdout}") from None
    if isinstance(doc, dict) and doc.get("ok") is False and "error" in doc:
        validate(doc, "error.json", f"the refusal of `vx {' '.join(argv)}`")
        return
    name = product(argv)
    if name is not None:
        validate(doc, name, f"the output of `vx {' '.join(argv)}`")


def summary_paths(argv: Sequence[str], cwd: Path) -> list[Path]:
    """Where each `--summarize=PATH` in `argv` points (relative to `cwd`); a bare `--summarize`
    writes under the cache, which the test reads itself if it cares."""
    words = [w.split("=", 1)[1] for w in _words(argv) if w.startswith("--summarize=")]
    return [cwd / target for target in words if target]


def check_summaries(argv: Sequence[str], cwd: Path) -> None:
    """Validate each summary `vx ARGV` was asked to write against summary.json, where one was
    written (a run refused before it ran writes none); a device like /dev/null is not read."""
    for path in summary_paths(argv, cwd):
        if path.is_file():
            validate(json.loads(path.read_text()), "summary.json", f"the summary {path}")


# ---------------------------------------------------------------- the config files

CONFIG_FILES = {
    "vx.config.json": "config.json",
    "vx.config.jsonc": "config.json",
    "vx.workspace.json": "workspace.json",
    "vx.workspace.jsonc": "workspace.json",
}


def check_configs(root: Path, written) -> None:
    """Validate each vx config file in `written` (workspace-relative) that is still there and
    that vx's own validator accepts against its schema: what vx takes, the schema must take too.
    A run can pass beside a config it refused (one outside its scope is only a warning)."""
    from vx.config.jsonc import loads
    from vx.config.project import validate_project
    from vx.config.workspace_file import validate_workspace
    from vx.errors import ConfigError

    for rel in sorted(written):
        path = root / rel
        if not path.is_file():
            continue
        name = CONFIG_FILES[path.name]
        try:
            data = loads(path.read_text(), rel)
            check = validate_project if name == "config.json" else validate_workspace
            check(copy.deepcopy(data), rel)
        except ConfigError:
            continue
        validate(data, name, rel)
