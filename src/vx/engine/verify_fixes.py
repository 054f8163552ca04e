"""How `vx run --verify=inputs` writes a fix (`vx.engine.verify`): in the vocabulary of the
config the task came from, vx.config text or turbo.json text at the definition it was mapped from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Mapping

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
    def output_fix(
        entry: str, wide: bool, owner: TaskId | None = None, back: tuple[str, ...] = ()
    ) -> str:
        text = f"cache.outputs.{'workspaceFiles' if wide else 'files'}: {json_list([entry, *back])}"
        return f"{owner}'s {text} ({owner} writes it undeclared)" if owner is not None else text

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


VX_FIXES = VxFixes()


class TurboFixes:
    """Fixes as turbo.json text, at the definition the task was mapped from."""

    def __init__(self, turbo, file: str, key: str, body: dict, new: bool = False):
        self.turbo, self.file, self.key, self.body = turbo, file, key, body
        self.new = new  # a `pkg#name` definition to write, for what one package alone needs

    def alone(self, tid: TaskId) -> TurboFixes:
        """The `pkg#name` definition for what `tid`'s package alone needs of this shared one."""
        return TurboFixes(
            self.turbo, self.file, task_key(f"{tid.package}#{tid.task}"), self.body, new=True
        )

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

    def output_fix(
        self, entry: str, wide: bool, owner: TaskId | None = None, back: tuple[str, ...] = ()
    ) -> str:
        entries = ", ".join(f'"{e}"' for e in self.outputs_text(entry, wide, back))
        if owner is not None:  # a dependant's line: the producer's own block says where
            return f'{entries} to the "outputs" of {owner}, which writes it undeclared'
        if self.new:
            return (
                f'{entries} to the "outputs" of a new {self.where} (this package alone writes it)'
            )
        return f'{entries} to {self.where} "outputs"'

    @staticmethod
    def outputs_text(entry: str, wide: bool, back: tuple[str, ...] = ()) -> list[str]:
        """An output entry, and the `!` entries that keep tools' caches out of it, as turbo.json
        writes them."""
        root = "$TURBO_ROOT$/" if wide else ""
        return [root + entry, *(f"!{root}{b[1:]}" for b in back)]

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


class TurboFold:
    """One turbo.json definition's fixes, folded over the packages of the run that have it: one
    list per field to paste, and a `pkg#name` definition for a package that alone writes an
    output (a shared definition's `outputs` say what each of its packages writes). A package
    that alone reads a file gets it in the shared `inputs`: a glob that matches nothing in the
    other packages is normal in turbo's model, and a `pkg#name` would fork the definition."""

    def __init__(self, fixes: TurboFixes, task: str):
        self.fixes, self.task = fixes, task
        self.packages: dict[str, None] = {}
        self.corrections: dict[str, dict[str, str | None]] = {}  # glob -> package -> its glob
        self.used: set[str] = set()  # corrected globs a package's reads were listed under
        self.inputs: dict[str, None] = {}
        self.outputs: dict[str, dict[str, None]] = {}  # entry -> the packages that write it
        self.empty: dict[str, dict[str, None]] = {}  # glob -> the packages it matched nothing in

    def add(
        self,
        package: str,
        corrections: Mapping[str, str | None],
        used: set[str],
        inputs: list[str],
        outputs: list[str],
        empty: Iterable[str] = (),
    ) -> None:
        """One package's findings (every traced package of the definition, findings or none);
        `empty`: its declared globs that match no file (none beside `$TURBO_DEFAULT$`)."""
        self.packages[package] = None
        for wrong, right in corrections.items():
            self.corrections.setdefault(wrong, {})[package] = right
        for glob in empty:
            self.empty.setdefault(glob, {})[package] = None
        self.used |= used
        self.inputs.update(dict.fromkeys(inputs))
        for entry in outputs:
            self.outputs.setdefault(entry, {})[package] = None

    def lines(self) -> list[str]:
        where, body = self.fixes.where, dict(self.fixes.body)
        out = [self._note(glob) for glob in self.corrections if glob not in self.used]
        out += [
            f'"{glob}" in {where} "inputs" matches no file in any package that runs it: left out'
            for glob in self._nowhere()
            if self.inputs
        ]
        if self.inputs:
            body["inputs"] = self._inputs()
            out.append(f'{where} with these fixes: "inputs": {json_list(body["inputs"])}')
        alone: dict[str, list[str]] = {}
        common = []
        for entry, packages in self.outputs.items():
            if len(packages) == 1 and len(self.packages) > 1:
                alone.setdefault(next(iter(packages)), []).append(entry)
            else:
                common.append(entry)
        if common:
            body["outputs"] = _unique([*body.get("outputs", []), *common])
            out.append(f'{where} with these fixes: "outputs": {json_list(body["outputs"])}')
        for package, entries in alone.items():
            own = {**body, "outputs": _unique([*body.get("outputs", []), *entries])}
            out.append(
                f"{self.fixes.file} with a new {task_key(f'{package}#{self.task}')} "
                f"({self.fixes.key} with these fixes, and the outputs {package} alone writes): "
                f"{json.dumps(own)}"
            )
        return out

    def _inputs(self) -> list[str]:
        """The declared list with each corrected glob replaced (kept where it matched in some
        package), then the entries the packages' reads need."""
        merged = []
        nowhere = self._nowhere()
        for glob in self.fixes.body.get("inputs") or ["$TURBO_DEFAULT$"]:
            if glob in nowhere:
                continue
            fixes = self.corrections.get(glob, {})
            if len(fixes) < len(self.packages):
                merged.append(glob)
            merged += [right for right in fixes.values() if right]
        return _unique([*merged, *self.inputs])

    def _nowhere(self) -> list[str]:
        """Declared globs that matched no file in any package (none that a correction explains):
        a typo, or what moved, which the pasted list leaves out."""
        return [
            glob
            for glob, packages in self.empty.items()
            if len(packages) == len(self.packages) and glob not in self.corrections
        ]

    def _note(self, glob: str) -> str:
        rights = [right for right in self.corrections[glob].values() if right]
        return self.fixes.glob_note(glob, rights[0] if rights else None)


def _unique(items) -> list[str]:
    return list(dict.fromkeys(items))


def _task_fix(node: TaskNode, producer: TaskId) -> str:
    """Fold the producer's key: an inputs.tasks entry for a dependency, else a new edge."""
    where = "cache.inputs.tasks" if producer in node.deps else "dependsOn"
    return f'{where}: ["{producer}"] ({producer} outputs it)'


def json_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"
