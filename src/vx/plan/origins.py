"""What a task's warnings say, decided once every plan of the run is made: in the words of the
file the user wrote, and once a run for what several tasks share.

A vx.config task's glob was written for its one project: one that matches nothing is named with
the task (`app#build: cache.inputs matched no files (nope/**)`). A turbo.json definition is
shared by every package that has the script, and a glob that matches nothing in some of them is
normal in turbo's model (floating-ui's `test/**` for the packages without tests): it is named once
a run, with turbo.json's own field, and only when it matches nothing in every package of the run
that runs the definition (`turbo.json tasks.typecheck.inputs: "test/**" matches no file in any
package that runs it`). A glob beside `$TURBO_DEFAULT$` is never named: the package's files are
keyed anyway, and such a glob only adds files git ignores when there are some (create-turbo's
`.env*`). docs/caching.md says why; turbo itself names none. Nor is a glob an Nx inference plugin
put in a target's inputs: the user wrote none of them, and Nx names none.
"""

from __future__ import annotations

from typing import Mapping

from msgspec.structs import replace

from vx.model import ProjectConfig, TaskGraph, TaskId, TaskPlan, Told

_TURBO_FILES = ("turbo.json", "turbo.jsonc")
# An Nx inference plugin's target (config/nx.py's field): its inputs are the plugin's, not the
# user's, and a plugin adds globs that often match nothing (@nx/eslint's
# `{workspaceRoot}/tools/eslint-rules/**/*` in every lint). Nx names none, and neither does vx.
_INFERRED = " (inferred by "


def told(
    plans: Mapping[TaskId, TaskPlan], graph: TaskGraph, configs: Mapping[str, ProjectConfig]
) -> dict[TaskId, TaskPlan]:
    """`plans`, each with what its warnings say (`TaskPlan.told`)."""
    out = dict(plans)
    found: dict[TaskId, list[tuple[str, str, tuple[str, str]]]] = {}
    members: dict[tuple[str, str], int] = {}  # a written inputs field -> the tasks that have it
    shapes: dict[tuple[int, str], tuple[tuple[str, str], Told]] = {}  # shared configs: once
    for tid, plan in plans.items():
        config = configs.get(tid.package)
        if config is None or plan.outputs is None or graph.nodes[tid].is_group:
            continue
        if config.origins:
            shape = (id(config), tid.task)
            if shape not in shapes:
                shapes[shape] = _shape(config, tid.task, plan)
            where, said = shapes[shape]
            members[where] = members.get(where, 0) + 1
            if said.outputs:
                out[tid] = replace(plan, told=said)
        if plan.inputs is not None and plan.inputs.unmatched_globs:
            found[tid] = list(_unmatched(tid, plan, graph, config))
    misses: dict[tuple[tuple[str, str], str], int] = {}
    for items in found.values():
        for _glob, shown, where in items:
            misses[where, shown] = misses.get((where, shown), 0) + 1
    for tid, items in found.items():
        pairs = _lines(tid, items, members, misses)
        if pairs:
            out[tid] = replace(out[tid], told=replace(out[tid].told, unmatched=pairs))
    return out


def _shape(config: ProjectConfig, task: str, plan: TaskPlan) -> tuple[tuple[str, str], Told]:
    """A mapped task's inputs field (file, field), and the field its outputs were written in."""
    inputs = config.located(f"tasks.{task}.cache.inputs.files")
    path = f"tasks.{task}.cache.outputs"
    file, where = config.located(path)
    if where == path or plan.outputs is None:
        return inputs, Told()
    turbo = file.endswith(_TURBO_FILES)
    declared = [
        *plan.outputs.patterns,
        *(("$TURBO_ROOT$/" if turbo else "") + g for g in _wide(plan)),
    ]
    shown = ", ".join(f'"{g}"' for g in declared)
    return inputs, Told(outputs=f"{file} {where} ({shown})")


def _wide(plan: TaskPlan) -> tuple[str, ...]:
    ws = plan.outputs.ws_globs if plan.outputs is not None else None
    return ws.patterns if ws is not None else ()


def _unmatched(tid: TaskId, plan: TaskPlan, graph: TaskGraph, config: ProjectConfig):
    """Each input glob of the task that matched nothing as planned, as (glob, as written, where:
    (file, field), or ("", "") for the task's own cache.inputs); none beside `$TURBO_DEFAULT$`."""
    cache = graph.nodes[tid].config.cache
    if plan.inputs is None or cache is None:
        return
    beside_default = cache.turbo_globs and cache.input_reach is not None
    for glob in plan.inputs.unmatched_globs:
        if glob in cache.input_files:
            i, wide = cache.input_files.index(glob), False
        elif glob in cache.input_workspace_files:
            i, wide = cache.input_workspace_files.index(glob), True
        else:
            continue
        path = f"tasks.{tid.task}.cache.inputs.{'workspaceFiles' if wide else 'files'}[{i}]"
        file, field = config.located(path)
        if not config.origins or field == path:
            yield glob, glob, ("", "")
        elif field.endswith(".inputs") and (beside_default or _INFERRED in field):
            continue
        else:
            turbo = file.endswith(_TURBO_FILES) and field.endswith(".inputs")
            yield glob, ("$TURBO_ROOT$/" if wide and turbo else "") + glob, (file, field)


def _lines(
    tid: TaskId,
    items: list[tuple[str, str, tuple[str, str]]],
    members: Mapping[tuple[str, str], int],
    misses: Mapping[tuple[tuple[str, str], str], int],
) -> tuple[tuple[str, str], ...]:
    """(glob, line) for each glob the task's warnings name: its own, and a shared definition's
    that matched nothing in every task of the run that has it (a root-relative glob matches the
    same files from every package)."""
    own = [glob for glob, _, where in items if where == ("", "")]
    pairs = [(g, f"{tid}: cache.inputs matched no files ({', '.join(own)})") for g in own]
    shared: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for glob, shown, where in items:
        if where == ("", ""):
            continue
        everywhere = shown.startswith("$TURBO_ROOT$/") or where[1] == "globalDependencies"
        if everywhere or misses[where, shown] >= members.get(where, 1):
            shared.setdefault(where, []).append((glob, shown))
    for (file, field), globs in shared.items():
        written = ", ".join(f'"{shown}"' for _, shown in globs)
        verb = "matches" if len(globs) == 1 else "match"
        scope = "package" if file.endswith(_TURBO_FILES) else "project"
        tail = "" if field == "globalDependencies" else f" in any {scope} that runs it"
        line = f"{file} {field}: {written} {verb} no file{tail}"
        pairs += [(glob, line) for glob, _ in globs]
    return tuple(pairs)
