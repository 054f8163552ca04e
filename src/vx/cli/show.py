"""`vx show`: the configs as vx resolved them — from vx.config files, configs written as
code (evaluated) or a Turborepo repository's turbo.json (mapped) — so what a key folds is visible.

`vx show` lists the projects; `vx show <project>` its tasks; `vx show <project>#<task>` one task;
`vx show <task>` that task in every project declaring it, with each project's workspace
dependencies. Nx's `show projects` and `show project <name>` are understood, and `vx ls` is
`vx show` (turbo's `ls`). `--format json` prints the same as data.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping

from vx.cli.args import Args, one_of
from vx.errors import UnknownTaskError, UsageError, suggestion
from vx.model import ROOT_PROJECT, ProjectConfig, Workspace


def show_verb(args: Args, argv: list[str]) -> int:
    from vx.config import loader as config
    from vx.workspace import discover as workspace

    env = os.environ
    fmt = one_of("--format", args.format, ("text", "json"), "text")
    if args.json:  # Nx's `nx show project NAME --json`, `nx show projects --json`
        if args.names[:1] not in (["project"], ["projects"]):
            raise UsageError(
                "`--json` is Nx's flag of `show project NAME` and `show projects`",
                hint="`vx show --format json` for vx's view",
            )
        fmt = "nx"
    names = _names(args.names)
    if fmt == "nx":
        from vx.config.nx import shown_project, shown_project_names

        ws = workspace.discover(Path(os.getcwd()))
        config.load_all(ws, env)
        if args.names[:1] == ["projects"]:
            if names:
                raise UsageError(
                    "`vx show projects --json` takes no project name",
                    hint="`vx show project NAME --json` for one project",
                )
            sys.stdout.write(json.dumps(shown_project_names(ws)) + "\n")
            return 0
        sys.stdout.write(json.dumps(shown_project(ws, names[0]), indent=2) + "\n")
        return 0
    data = resolved(names, Path(os.getcwd()), env)
    sys.stdout.write(json.dumps(data, indent=2) + "\n" if fmt == "json" else _pretty(data))
    return 0


def resolved(names: list[str], cwd: Path, env: Mapping[str, str]) -> dict:
    """What `vx show [NAME] --format json` prints: the projects, one project, one task, or a task
    in every project declaring it."""
    from vx.plugins.shaped import shaped_projects
    from vx.workspace import discover as workspace

    # what a run would run: the plugins' projects and edits included
    ws, configs = shaped_projects(workspace.discover(cwd), env)
    return _select(names, ws, configs)


def _names(names: list[str]) -> list[str]:
    if names[:1] == ["projects"]:  # Nx
        names = names[1:]
    elif names[:1] == ["project"]:
        if len(names) != 2:
            raise UsageError(
                "`vx show project` needs one project name", hint="e.g. `vx show project web`"
            )
        names = names[1:]
    if len(names) > 1:
        raise UsageError(
            f"`vx show` takes one project or task, got {len(names)}",
            hint="e.g. `vx show web#build`",
        )
    return names


def _select(names: list[str], ws: Workspace, configs: Mapping[str, ProjectConfig]) -> dict:
    if not names:
        return {"projects": [_project_row(name, ws, configs[name]) for name in sorted(ws.packages)]}
    name = names[0]
    if "#" in name:
        project, _, task = name.rpartition("#")
        project = project or ROOT_PROJECT
        cfg = _project_config(project, ws, configs)
        if task not in cfg.tasks:
            raise UnknownTaskError(
                f"project `{project}` has no task `{task}`",
                hint=suggestion(task, cfg.tasks, noun="tasks"),
            )
        return {"project": project, "source": cfg.source, "tasks": {task: _task_data(cfg, task)}}
    if name in ws.packages:
        cfg = configs[name]
        return {
            "project": name,
            "dir": ws.packages[name].dir,
            "source": cfg.source,
            "tags": list(cfg.tags),
            "dependencies": list(ws.packages[name].deps),
            "tasks": {task: _task_data(cfg, task) for task in sorted(cfg.tasks)},
        }
    holders = {p: _task_data(configs[p], name) for p in sorted(configs) if name in configs[p].tasks}
    if not holders:
        everything = set(ws.packages) | {t for c in configs.values() for t in c.tasks}
        raise UnknownTaskError(
            f"`{name}` is neither a project nor a task",
            hint=suggestion(name, everything, noun="names"),
        )
    return {"task": name, "projects": holders}


def _project_config(project: str, ws: Workspace, configs) -> ProjectConfig:
    if project not in ws.packages:
        raise UnknownTaskError(
            f"no project named `{project}`", hint=suggestion(project, ws.packages, noun="projects")
        )
    return configs[project]


def _project_row(name: str, ws: Workspace, cfg: ProjectConfig) -> dict:
    return {
        "name": name,
        "dir": ws.packages[name].dir or ".",
        "dependencies": list(ws.packages[name].deps),
        "tasks": sorted(cfg.tasks),
        "tags": list(cfg.tags),
        "source": cfg.source or None,
    }


def _task_data(cfg: ProjectConfig, task: str) -> Any:
    """The declaration as resolved: what the key folds, and the framework whose variables
    a turbo.json task keys besides."""
    data = json.loads(cfg.tasks[task].canonical)
    config = cfg.tasks[task]
    if config.exec is not None and config.exec.env.framework:
        from vx.workspace import frameworks

        data["inferredEnv"] = {
            "framework": config.exec.env.framework,
            "variables": list(frameworks.env_patterns(config.exec.env.framework, {})),
        }
    return data


# ---------------------------------------------------------------- text


def _pretty(data: dict) -> str:
    if "projects" in data and isinstance(data["projects"], list):
        return _table(data["projects"])
    lines = []
    if "task" in data:
        for project, body in data["projects"].items():
            lines.append(f"{project}#{data['task']}")
            lines += _fields(body, "  ")
        return "\n".join(lines) + "\n"
    lines.append(
        f"{data['project']}" + (f"  ({data['source']})" if data.get("source") else "  (no config)")
    )
    if data.get("tags"):
        lines.append(f"  tags: {', '.join(data['tags'])}")
    if data.get("dependencies"):
        lines.append(f"  depends on: {', '.join(data['dependencies'])}")
    for task, body in data["tasks"].items():
        lines.append(f"  {task}")
        lines += _fields(body, "    ")
    return "\n".join(lines) + "\n"


def _fields(value: Any, indent: str) -> list[str]:
    """Only the fields a task sets, one per line, nested by indentation."""
    out = []
    for key, item in value.items():
        if isinstance(item, dict):
            out.append(f"{indent}{key}:")
            out += _fields(item, indent + "  ")
        elif isinstance(item, list):
            out.append(
                f"{indent}{key}: {', '.join(json.dumps(v) if not isinstance(v, str) else v for v in item) or '[]'}"
            )
        else:
            out.append(f"{indent}{key}: {item}")
    return out


def _table(rows: list[dict]) -> str:
    header = ("PROJECT", "DIR", "DEPENDS ON", "TASKS", "CONFIG")
    body = [
        (
            r["name"],
            r["dir"],
            ", ".join(r["dependencies"]) or "—",
            ", ".join(r["tasks"]) or "—",
            r["source"] or "— (none)",
        )
        for r in rows
    ]
    widths = [max(len(str(row[i])) for row in [header, *body]) for i in range(4)]
    lines = [
        "  ".join(str(cell).ljust(widths[i]) if i < 4 else str(cell) for i, cell in enumerate(row))
        for row in [header, *body]
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"
