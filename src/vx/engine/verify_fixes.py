"""How `vx run --verify=inputs` writes a fix (`vx.engine.verify`): in the vocabulary of the
config the task came from, vx.config text or turbo.json text at the definition it was mapped from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from vx.config.turbo import task_key
from vx.model import TaskId, TaskNode


class VxFixes:
    """Fixes as vx.config text."""

    @staticmethod
    def input_fix(entry: str, wide: bool, instead: str | None = None, shared: bool = False) -> str:
        text = f'cache.inputs.{"workspaceFiles" if wide else "files"}: ["{entry}"]'
        if instead:
            text += f' (in place of "{instead}": files globs are project-relative)'
        return text

    @staticmethod
    def output_fix(entry: str, wide: bool, owner: TaskId | None = None) -> str:
        text = f'cache.outputs.{"workspaceFiles" if wide else "files"}: ["{entry}"]'
        return f"{owner}'s {text}" if owner is not None else text

    @staticmethod
    def edge_fix(node: TaskNode, producer: TaskId, caret: bool) -> str:
        return _task_fix(node, producer)

    @staticmethod
    def dependency(node: TaskNode, producer: TaskId, caret: bool) -> str:
        """The dependsOn entry that orders `node` after `producer` and folds its key."""
        return f'dependsOn: ["{f"^{producer.task}" if caret else producer}"]'

    @staticmethod
    def glob_note(glob: str, right: str | None) -> str:
        if right is None:
            return (
                f'"{glob}" in cache.inputs.files matches nothing: files globs are project-relative; '
                "cache.inputs.workspaceFiles takes it from the root"
            )
        return (
            f'"{glob}" in cache.inputs.files matches nothing: files globs are project-relative; '
            f'"{right}" here, or cache.inputs.workspaceFiles for a root-relative glob'
        )

    @staticmethod
    def merged(added, corrections, outputs) -> list[str]:
        return []


VX_FIXES = VxFixes()


class TurboFixes:
    """Fixes as turbo.json text, at the definition the task was mapped from."""

    def __init__(self, turbo, file: str, key: str, body: dict):
        self.turbo, self.file, self.key, self.body = turbo, file, key, body

    @classmethod
    def of(cls, turbo, root: Path, pkg, task: str, source: str) -> TurboFixes:
        from vx.config.turbo import definitions, read_package

        own = read_package(str(root / pkg.dir), source) if source != turbo.source else None
        body = definitions(turbo, pkg, own).get(task, {})
        if own is not None and task in own["tasks"]:
            return cls(turbo, source, task_key(task), body)
        qualified = f"{pkg.name}#{task}"
        return cls(
            turbo, turbo.source, task_key(qualified if qualified in turbo.tasks else task), body
        )

    @property
    def where(self) -> str:
        return f"{self.file} {self.key}"

    def input_fix(
        self, entry: str, wide: bool, instead: str | None = None, shared: bool = False
    ) -> str:
        if shared:
            return f'"{entry}" to {self.turbo.source} "globalDependencies" (tasks of several packages read it)'
        text = f'"{"$TURBO_ROOT$/" if wide else ""}{entry}" to {self.where} "inputs"'
        if instead:
            text += f' (in place of "{instead}": turbo inputs are package-relative)'
        return text

    def output_fix(self, entry: str, wide: bool, owner: TaskId | None = None) -> str:
        return f'"{"$TURBO_ROOT$/" if wide else ""}{entry}" to {self.where} "outputs"'

    def edge_fix(self, node: TaskNode, producer: TaskId, caret: bool) -> str:
        return f"{self.dependency(node, producer, caret)} ({producer} outputs it)"

    def dependency(self, node: TaskNode, producer: TaskId, caret: bool) -> str:
        """The dependsOn entry that orders `node` after `producer` and folds its key."""
        dep = (
            f"^{producer.task}"
            if caret
            else producer.task
            if producer.package == node.id.package
            else str(producer)
        )
        return f'"{dep}" to {self.where} "dependsOn"'

    def glob_note(self, glob: str, right: str | None) -> str:
        if right is None:
            return (
                f'"{glob}" in {self.where} "inputs" matches nothing: turbo inputs are package-relative; '
                f'"$TURBO_ROOT$/{glob}" matches from the root'
            )
        return (
            f'"{glob}" in {self.where} "inputs" matches nothing: turbo inputs are package-relative; '
            f'"{right}" here, or "$TURBO_ROOT$/{glob}" for root-relative'
        )

    def merged(self, entries: list, corrections: Mapping[str, str | None], outputs) -> list[str]:
        """The definition's whole lists with every fix of the block, to paste."""
        out = []
        added = [
            ("$TURBO_ROOT$/" if wide else "") + entry
            for entry, wide, shared in entries
            if not shared
        ]
        if added:
            declared = [
                corrections.get(g) or g for g in self.body.get("inputs") or ["$TURBO_DEFAULT$"]
            ]
            out.append(
                f'{self.where} with these fixes: "inputs": {json_list(list(dict.fromkeys([*declared, *added])))}'
            )
        if outputs:
            entries = [("$TURBO_ROOT$/" if wide else "") + e for e, wide, _ in outputs]
            merged = list(dict.fromkeys([*self.body.get("outputs", []), *entries]))
            out.append(f'{self.where} with these fixes: "outputs": {json_list(merged)}')
        return out


def _task_fix(node: TaskNode, producer: TaskId) -> str:
    """Fold the producer's key: an inputs.tasks entry for a dependency, else a new edge."""
    where = "cache.inputs.tasks" if producer in node.deps else "dependsOn"
    return f'{where}: ["{producer}"] ({producer} outputs it)'


def json_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"
