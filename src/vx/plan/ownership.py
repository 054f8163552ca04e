"""Which task owns which output path: two tasks of one graph may not declare overlapping outputs.
Each task's outputs are wiped before it runs and before a restore, so a dependant
whose outputs cover its upstream's would delete them, and restores of the two would undo each other.

Outputs are compared by path, as spelt in normal form. A literal names the file or its whole tree,
and so does `dir/**`; either collides with any output whose literal head lies inside it. Overlaps
that are only possible (`dist/*` beside `dist/sub/**`) are let through. A `!` entry that takes a
tree back (`!dist/types/**`) leaves that tree to another task. Workspace outputs are compared with
every project's. With `rules.exclusiveOutputs: false`, an overlap between two tasks an edge orders
is allowed: the later one adds to the earlier one's outputs (plan.AdditiveOutputs).
"""

from __future__ import annotations

from typing import Mapping, NamedTuple, NoReturn

from vx.errors import ConfigError
from vx.files.globs import normalise, spans
from vx.model import ProjectConfig, TaskId, TaskNode


class _Claim(NamedTuple):  # a tuple: a thousand-project run makes thousands, on every run
    head: str  # workspace-relative literal head
    tree: bool  # the head's whole tree
    text: str  # the alternative in normal form, workspace-relative
    task: TaskId
    pattern: str  # as written
    workspace: bool  # from outputs.workspaceFiles
    wide: bool = False  # a wildcard taken as its head's whole tree (a turbo or Nx task's)


def refuse_overlaps(
    nodes: Mapping[TaskId, TaskNode],
    configs: Mapping[str, ProjectConfig],
    exclusive: bool = True,
    unordered: set[TaskId] | None = None,
) -> frozenset[TaskId]:
    """Raise a ConfigError naming both tasks when two nodes' declared outputs overlap. With
    `rules.exclusiveOutputs: false`, an overlap an edge orders is allowed: the dependants that add
    to an upstream's outputs are returned. Tasks mapped from turbo.json may always overlap,
    as under turbo: they are returned as adding to the shared outputs. `unordered` gets the
    tasks that share outputs with one no edge orders them with (it may write there meanwhile)."""
    claims: list[_Claim] = []
    taken_back: dict[TaskId, list[str]] = {}
    for tid in nodes:
        cfg = nodes[tid].config
        if cfg.exec is None or cfg.cache is None:
            continue  # groups (implicit ones too) own no outputs
        base = nodes[tid].project_dir
        shares = _shares(nodes, tid)
        for patterns, root, workspace in (
            (cfg.cache.output_files, base, False),
            (cfg.cache.output_workspace_files, "", True),
        ):
            for pattern in patterns:
                if pattern.startswith("!"):
                    taken_back.setdefault(tid, []).extend(
                        _join(root, head) for _text, head, tree in spans(pattern[1:]) if tree
                    )
                    continue
                for text, head, tree in spans(pattern):
                    # A turbo or Nx task's wildcard (`**/*.js`, an Nx `typecheck`'s) may
                    # reach any file under its head: one that shares outputs adds to them.
                    wide = shares and not tree
                    claims.append(
                        _Claim(
                            _join(root, head),
                            tree or wide,
                            _join(root, text),
                            tid,
                            pattern,
                            workspace,
                            wide,
                        )
                    )
    if len(claims) < 2:
        return frozenset()
    claims.sort()
    additive: set[TaskId] = set()
    upstream: dict[TaskId, set[TaskId]] = {}
    for i, claim in enumerate(claims):
        for other in _inside(claims, i):
            if other.task == claim.task or _left_to_others(
                taken_back.get(claim.task, ()), other.head
            ):
                continue
            both = _shares(nodes, claim.task) and _shares(nodes, other.task)
            if claim.wide and not both:
                continue  # only possible, as for any wildcard
            later = _ordered(nodes, upstream, claim.task, other.task)
            if both:
                # turbo and Nx never wipe outputs before a task runs, so their tasks may share
                # them (floating-ui's `build` and `build:api` both write dist/, as do an Nx
                # library's inferred `build` and `typecheck`): each task adds to what is there —
                # the later one when an edge orders them, both when none does, as under turbo and
                # Nx. (Nx's restore does delete an entry's outputs first; vx's does not here, so
                # a file a shared task no longer writes can stay: docs/benchmarks.md, Nx.)
                additive.update((later,) if later is not None else (claim.task, other.task))
                if later is None and unordered is not None:
                    unordered.update((claim.task, other.task))
                continue
            if later is None or exclusive:
                _refuse(claim, other, configs, later is not None, exclusive)
            additive.add(later)
    return frozenset(additive)


def _shares(nodes: Mapping[TaskId, TaskNode], tid: TaskId) -> bool:
    """Whether the task is mapped from turbo.json or an Nx target (neither tool wipes outputs)."""
    cache = nodes[tid].config.cache
    return cache is not None and (cache.turbo_globs or cache.shared_outputs)


def _ordered(
    nodes: Mapping[TaskId, TaskNode], memo: dict[TaskId, set[TaskId]], a: TaskId, b: TaskId
) -> TaskId | None:
    """The one of `a` and `b` that an edge orders after the other, or None when none does."""
    if a in _upstream(nodes, memo, b):
        return b
    if b in _upstream(nodes, memo, a):
        return a
    return None


def _inside(claims: list[_Claim], i: int):
    """The claims whose head lies in claim `i`'s tree (or that spell its wildcard pattern). Sorted,
    the heads starting with its head follow it; those equal to it may also come just before."""
    claim = claims[i]
    head = claim.head
    j = i - 1
    while j >= 0 and claims[j].head == head:
        if claim.tree or (not claims[j].tree and claims[j].text == claim.text):
            yield claims[j]
        j -= 1
    below = head + "/"
    for other in claims[i + 1 :] if not head and claim.tree else ():
        yield other  # the workspace's whole tree
    j = i + 1
    while head and j < len(claims) and claims[j].head.startswith(head):
        other = claims[j]
        if other.head == head:
            if claim.tree or (not other.tree and other.text == claim.text):
                yield other
        elif claim.tree and other.head.startswith(below):
            yield other
        j += 1


def _left_to_others(taken_back, head: str) -> bool:
    return any(head == t or head.startswith(t + "/") or not t for t in taken_back)


def _refuse(
    claim: _Claim,
    other: _Claim,
    configs: Mapping[str, ProjectConfig],
    ordered: bool,
    exclusive: bool,
) -> NoReturn:
    first, second = sorted((claim, other), key=lambda c: c.task)
    source, field = configs[second.task.package].located(
        _field(configs[second.task.package].source, second)
    )
    other_source = configs[first.task.package].located(
        _field(configs[first.task.package].source, first)
    )[0]
    where = f" (declared in {other_source})" if other_source != source else ""
    why = (
        "the dependant's wipe before it runs deletes what its upstream made"
        if ordered
        else "each wipes and restores the other's files"
    )
    hint = (
        f"give each task its own outputs (e.g. `{_own_dir(second)}`), or take the overlap back from "
        f"one of them with a `!` entry"
    )
    if ordered and exclusive:
        hint += '; or let the dependant add to them: "rules": {"exclusiveOutputs": false} in vx.workspace.json'
    elif not exclusive:
        hint += "; with exclusiveOutputs off, tasks may share outputs only when one depends on the other"
    raise ConfigError(
        f"`{first.task}` and `{second.task}` declare overlapping outputs: `{first.pattern}`{where} and "
        f"`{second.pattern}`; {why}",
        file=source,
        field=field,
        hint=hint,
    )


def _field(source: str, claim: _Claim) -> str:
    if source.endswith(("turbo.json", "turbo.jsonc")):
        return f"tasks.{claim.task.task}.outputs"
    return (
        f"tasks.{claim.task.task}.cache.outputs.{'workspaceFiles' if claim.workspace else 'files'}"
    )


def _own_dir(claim: _Claim) -> str:
    top = normalise(claim.pattern).split("/")[0] or "dist"
    return f"{top}/{claim.task.task}/**"


def _upstream(
    nodes: Mapping[TaskId, TaskNode], memo: dict[TaskId, set[TaskId]], tid: TaskId
) -> set[TaskId]:
    if tid in memo:
        return memo[tid]
    seen = memo[tid] = set()
    pending = [tid]
    while pending:
        for dep in nodes[pending.pop()].deps:
            if dep not in seen:
                seen.add(dep)
                pending.append(dep)
    return seen


def _join(a: str, b: str) -> str:
    return f"{a}/{b}" if a and b else a or b
