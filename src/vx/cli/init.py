"""`vx init [--dry] [--force]`: a vx.config.json per package, from its package.json scripts.

Each script becomes a task running it. `build` depends on the dependencies' builds (`^build`);
`test`, `typecheck`, `lint`-like scripts that check built code depend on the package's own `build`.
Caching is left for the user to turn on — vx caches a task only when it names what it reads and
writes — so each `build` gets the cache block as a comment (`--cache` writes it uncommented): the
output directories this package's tooling suggests, and as inputs every file of the package, as
turbo hashes them. A guess narrower than that (`src/**`) would leave out the tsconfig and the
tool configs a build reads, and an edit to them would be a hit on the old output; the comment
says how to narrow it: with what `vx run build --verify=inputs` shows the build reads.
Long-running scripts (`dev`, `start`, `serve`, `watch`, `preview`, or a command that watches)
become persistent tasks, after the dependencies' builds. Root scripts that run the
members (`turbo run`, `npm run … --workspaces`, `lerna`, `nx`) are no root task; in the root
package.json they become `vx run <name>`, so `npm run build` goes through vx too. An existing
vx.config is kept unless `--force`. In a Turborepo repository vx already runs turbo.json as it is;
`vx init` then writes configs only when asked with `--force`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from vx.cli.args import Args
from vx.config.turbo import hook_manager, with_hooks
from vx.model import ROOT_PROJECT, Package, Workspace

LONG_RUNNING = re.compile(r"^(dev|start|serve|watch|preview)(:|$)")
WATCHING = re.compile(r"(--watch\b|\s-w\b|\bnodemon\b|\bvite(\s+dev)?\s*$|\bnext dev\b|\bserve\b)")
# `--workspaces` and `-ws` start with no word character, so they cannot sit behind a `\b`.
RUNS_MEMBERS = re.compile(
    r"\b(vx run|turbo run|turbo\s+\w+|lerna|nx (run|run-many|affected)|"
    r"pnpm (-r|--recursive)|yarn workspaces)\b|(^|\s)(--workspaces?|-ws)(\s|=|$)"
)
CHECKS_BUILD = re.compile(r"^(test|typecheck|type-check|e2e)(:|$)")
TASK_NAME = re.compile(r"^[^\s#*^!][^\s#*]*$")
# Output directories a package's tooling suggests, by what its build script or manifest names.
_OUTPUTS = (
    ("next", [".next/**", "!.next/cache/**"]),
    ("nuxt", [".nuxt/**", ".output/**"]),
    ("remix", ["build/**", "public/build/**"]),
    ("react-scripts", ["build/**"]),
    ("docusaurus", ["build/**"]),
    ("gatsby", ["public/**", ".cache/**"]),
    ("storybook", ["storybook-static/**"]),
    ("astro", ["dist/**"]),
)


def init_verb(args: Args, argv: list[str]) -> int:
    """`vx init [--dry] [--force]`, its flags parsed."""
    from vx.cli.args import say
    from vx.workspace import discover as workspace

    ws = workspace.discover(Path(os.getcwd()))
    turbo = any((ws.root / name).exists() for name in ("turbo.json", "turbo.jsonc"))
    if turbo and not args.force:
        say(
            "vx init: this is a Turborepo repository: vx runs turbo.json as it is (see `vx show`); "
            "`vx init --force` writes vx.config.json files instead"
        )
        return 0
    if (ws.root / "nx.json").exists() and not args.force:  # its configs would hide the targets
        say(
            "vx init: this is an Nx workspace: vx runs nx.json, project.json and package.json targets as they are "
            "(see `vx show`); `vx init --force` writes vx.config.json files from the scripts instead"
        )
        return 0
    plans = {name: plan(ws, pkg) for name, pkg in sorted(ws.packages.items())}
    written = 0
    for name, (config, notes) in plans.items():
        pkg = ws.packages[name]
        target = ws.root / pkg.dir / "vx.config.json"
        shown = f"{pkg.dir}/vx.config.json" if pkg.dir else "vx.config.json"
        existing = [p for p in (ws.root / pkg.dir).glob("vx.config.*")]
        if not config["tasks"]:
            if notes:
                say(f"  {shown}: nothing to write ({'; '.join(notes)})")
            continue
        if existing and not args.force:
            say(f"  {shown}: kept (a {existing[0].name} exists; --force replaces it)")
            continue
        text = render(config, cache=args.cache)
        if args.dry:
            sys.stdout.write(f"// {shown}\n{text}\n")
        else:
            for old in existing:
                old.unlink()
            target.write_text(text)
        written += 1
        say(
            f"  {shown}: {', '.join(config['tasks'])}" + (f" ({'; '.join(notes)})" if notes else "")
        )
    mapped = _map_root_scripts(ws, dry=args.dry)
    if mapped:
        say(
            f"  package.json: {', '.join(f'`{name}`' for name in mapped)} "
            f"{'would run' if args.dry else 'now runs'} `vx run …` (it ran every member itself)"
        )
    verb = "would write" if args.dry else "wrote"
    if args.cache:
        say(
            f"vx init: {verb} {written} config file(s) with caching on for each build, keyed on every file "
            "of its package; `vx run build --verify=inputs` checks them"
        )
    else:
        say(
            f"vx init: {verb} {written} config file(s); next: turn on caching in each build (the commented "
            "cache block, or `vx init --force --cache` to write it on), then `vx run build`"
        )
    return 0


_MEMBER_SCRIPT = re.compile(
    r"^\s*(?:npm run (\S+) (?:--workspaces|-ws)|turbo run (\S+)|turbo (build|test|lint|dev)"
    r"|pnpm (?:-r|--recursive) (?:run )?(\S+)|yarn workspaces (?:foreach (?:-A |--all )?)?run (\S+)"
    r"|lerna run (\S+))\s*$"
)


def _map_root_scripts(ws: Workspace, dry: bool) -> list[str]:
    """The root package.json's scripts that only run one script in every member, rewritten to
    `vx run <it>` (the rest of the file kept byte for byte): vx does that, with its cache."""
    root = ws.packages.get(ROOT_PROJECT)
    if root is None:
        return []
    path = ws.root / "package.json"
    text = path.read_text()
    mapped = []
    for name, script in root.scripts.items():
        m = _MEMBER_SCRIPT.match(script)
        task = next((g for g in m.groups() if g), None) if m else None
        if task is None or not TASK_NAME.match(task):
            continue
        old = f"{json.dumps(name)}: {json.dumps(script)}"
        if old not in text:
            old = f"{json.dumps(name)}:{json.dumps(script)}"
            if old not in text:
                continue  # written some other way: leave it rather than guess
        text = text.replace(old, f"{json.dumps(name)}: {json.dumps(f'vx run {task}')}", 1)
        mapped.append(name)
    if mapped and not dry:
        path.write_text(text)
    return mapped


def plan(ws: Workspace, pkg: Package) -> tuple[dict, list[str]]:
    """The config for one package, and the notes on what was left out."""
    tasks: dict[str, dict] = {}
    notes: list[str] = []
    scripts = pkg.scripts
    for name, script in scripts.items():
        if (
            name.startswith(("pre", "post"))
            and name[3 if name.startswith("pre") else 4 :] in scripts
        ):
            continue  # npm's hooks run with their script: folded into it below
        if not TASK_NAME.match(name):
            notes.append(f"`{name}` skipped: not a task name")
            continue
        if pkg.name == ROOT_PROJECT and RUNS_MEMBERS.search(script):
            notes.append(f"`{name}` left out: it runs the members, which vx does itself")
            continue
        task = _task(ws, pkg, name, with_hooks(pkg, name, hook_manager(ws.manager, ws.root)))
        if LONG_RUNNING.match(name) or WATCHING.search(script):
            task = _persistent(ws, pkg, task)
            notes.append(f"`{name}` is persistent: it keeps running")
        tasks[name] = task
    return {"tasks": tasks}, notes


def _task(ws: Workspace, pkg: Package, name: str, command: str) -> dict:
    task: dict = {"exec": {"command": command}}
    if name == "build":
        if any("build" in ws.packages[d].scripts for d in pkg.deps if d in ws.packages):
            task["dependsOn"] = ["^build"]
        task["$cache"] = _outputs(pkg, command)
    elif CHECKS_BUILD.match(name) and "build" in pkg.scripts:
        task["dependsOn"] = ["build"]
    return task


def _persistent(ws: Workspace, pkg: Package, task: dict) -> dict:
    """A server or watcher: ready once started, after the dependencies' builds; never cached."""
    out: dict[str, Any] = {"exec": {**task["exec"], "persistent": {}}}
    if any("build" in ws.packages[d].scripts for d in pkg.deps if d in ws.packages):
        out["dependsOn"] = ["^build"]
    return out


def _outputs(pkg: Package, command: str) -> list[str]:
    for word, outputs in _OUTPUTS:
        if re.search(rf"\b{word}\b", command):
            return outputs
    m = re.search(r"--out(?:Dir|-dir)[= ](\S+)", command)
    if m:
        return [m.group(1).strip("'\"./").rstrip("/") + "/**"]
    return ["dist/**"]


# Above each build's cache block: what its inputs are, and how to narrow them soundly.
_CACHE_NOTE = (
    "inputs: every file of the package git does not ignore (outputs aside), as turbo hashes;",
    "narrow them only to what `vx run build --verify=inputs` shows the build reads (its",
    "tsconfig and tool configs too). Outputs: check that they name what the build writes.",
)


def render(config: dict, cache: bool = False) -> str:
    """JSON with comments: the cache block of a build is written commented out, to turn on
    (or on, with `cache`)."""
    lines = ["{", '  "tasks": {']
    names = list(config["tasks"])
    for i, name in enumerate(names):
        task = dict(config["tasks"][name])
        outputs = task.pop("$cache", None)
        body = json.dumps(task, indent=2).splitlines()
        lines.append(f"    {json.dumps(name)}: " + body[0])
        lines += ["    " + line for line in body[1:-1]]
        if outputs is not None:
            lines[-1] += ","
            block = {"inputs": {"files": ["**"]}, "outputs": {"files": outputs}}
            lines += [f"      // {line}" for line in _CACHE_NOTE]
            if cache:
                lines.append(f'      "cache": {json.dumps(block)}')
            else:
                lines.append("      // Uncomment the block to cache the build:")
                lines += [
                    "      // " + line for line in f'"cache": {json.dumps(block)}'.splitlines()
                ]
        lines.append("    " + body[-1] + ("," if i < len(names) - 1 else ""))
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"
