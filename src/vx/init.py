"""`vx init [--dry] [--force]`: a vx.config.json per package, from its package.json scripts (TL-01).

Each script becomes a task running it. `build` depends on the dependencies' builds (`^build`);
`test`, `typecheck`, `lint`-like scripts that check built code depend on the package's own `build`.
Caching is left for the user to turn on — vx caches a task only when it names what it reads and
writes, and a wrong guess serves stale output — so each `build` gets the cache block as a comment
with the output directories this package's tooling suggests. Long-running scripts (`dev`, `start`,
`serve`, `watch`, `preview`, or a command that watches) are left out with a note: vx tasks finish.
Root scripts that run the members (`turbo run`, `npm run … --workspaces`, `lerna`, `nx`) are
skipped. An existing vx.config is kept unless `--force`. In a Turborepo repository vx already runs
turbo.json as it is; `vx init` then writes configs only when asked with `--force`.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from vx.config.turbo import hook_manager, with_hooks
from vx.args import Args
from vx.model import ROOT_PROJECT, Package, Workspace

LONG_RUNNING = re.compile(r"^(dev|start|serve|watch|preview)(:|$)")
WATCHING = re.compile(r"(--watch\b|\s-w\b|\bnodemon\b|\bvite(\s+dev)?\s*$|\bnext dev\b|\bserve\b)")
RUNS_MEMBERS = re.compile(r"\b(turbo run|turbo\s+\w+|lerna|nx (run|run-many|affected)|--workspaces?\b|-ws\b|"
                          r"pnpm (-r|--recursive)|yarn workspaces)\b")
CHECKS_BUILD = re.compile(r"^(test|typecheck|type-check|e2e)(:|$)")
TASK_NAME = re.compile(r"^[^\s#*^!][^\s#*]*$")
# Output directories a package's tooling suggests, by what its build script or manifest names.
_OUTPUTS = (("next", [".next/**", "!.next/cache/**"]), ("nuxt", [".nuxt/**", ".output/**"]),
            ("remix", ["build/**", "public/build/**"]), ("react-scripts", ["build/**"]),
            ("docusaurus", ["build/**"]), ("gatsby", ["public/**", ".cache/**"]),
            ("storybook", ["storybook-static/**"]), ("astro", ["dist/**"]))


def init_verb(args: Args, say) -> int:
    """`vx init [--dry] [--force]`, its flags parsed."""
    from vx import workspace

    ws = workspace.discover(Path(os.getcwd()))
    turbo = any((ws.root / name).exists() for name in ("turbo.json", "turbo.jsonc"))
    if turbo and not args.force:
        say("vx init: this is a Turborepo repository: vx runs turbo.json as it is (see `vx show`); "
            "`vx init --force` writes vx.config.json files instead")
        return 0
    if (ws.root / "nx.json").exists() and not args.force:  # TL-04: its configs would hide the targets
        say("vx init: this is an Nx workspace: vx runs nx.json, project.json and package.json targets as they are "
            "(see `vx show`); `vx init --force` writes vx.config.json files from the scripts instead")
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
        text = render(config)
        if args.dry:
            sys.stdout.write(f"// {shown}\n{text}\n")
        else:
            for old in existing:
                old.unlink()
            target.write_text(text)
        written += 1
        say(f"  {shown}: {', '.join(config['tasks'])}" + (f" ({'; '.join(notes)})" if notes else ""))
    verb = "would write" if args.dry else "wrote"
    say(f"vx init: {verb} {written} config file(s); next: turn on caching in each build (the commented "
        "cache block), then `vx run build`")
    return 0


def plan(ws: Workspace, pkg: Package) -> tuple[dict, list[str]]:
    """The config for one package, and the notes on what was left out."""
    tasks: dict[str, dict] = {}
    notes: list[str] = []
    scripts = pkg.scripts
    for name, script in scripts.items():
        if name.startswith(("pre", "post")) and name[3 if name.startswith("pre") else 4:] in scripts:
            continue  # npm's hooks run with their script: folded into it below
        if not TASK_NAME.match(name):
            notes.append(f"`{name}` skipped: not a task name")
            continue
        if LONG_RUNNING.match(name) or WATCHING.search(script):
            notes.append(f"`{name}` left out: it keeps running")
            continue
        if pkg.name == ROOT_PROJECT and RUNS_MEMBERS.search(script):
            notes.append(f"`{name}` left out: it runs the members, which vx does itself")
            continue
        tasks[name] = _task(ws, pkg, name, with_hooks(pkg, name, hook_manager(ws.manager, ws.root)))
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


def _outputs(pkg: Package, command: str) -> list[str]:
    for word, outputs in _OUTPUTS:
        if re.search(rf"\b{word}\b", command):
            return outputs
    m = re.search(r"--out(?:Dir|-dir)[= ](\S+)", command)
    if m:
        return [m.group(1).strip("'\"./").rstrip("/") + "/**"]
    return ["dist/**"]


def render(config: dict) -> str:
    """JSON with comments: the cache block of a build is written commented out, to turn on."""
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
            cache = {"inputs": {"files": ["src/**", "package.json"]}, "outputs": {"files": outputs}}
            lines.append("      // TODO: name what the build reads and writes, then uncomment to cache it:")
            lines += ["      // " + line for line in f'"cache": {json.dumps(cache)}'.splitlines()]
        lines.append("    " + body[-1] + ("," if i < len(names) - 1 else ""))
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"
