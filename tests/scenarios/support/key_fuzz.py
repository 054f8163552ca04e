"""The key fuzzer's workspace, mutations and oracle (test_key_fuzz.py drives them).

A generated workspace is 2–4 projects in a real git repo. Every cached task runs fuzz_task.js,
which reads exactly what its task declares and writes all of it, labelled, into dist/out.txt.
The oracle here works that output out again from the files on disk, its own glob and ignore
rules and the env it hands vx — never from vx — and models the key as the docs define it (the
task's declaration, its package.json, the lockfile, its env values, its upstream keys and the
content of every file it reads), so after each mutation it knows, per task, whether running
it now would be needed and what it must leave in dist/.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import event
from hypothesis import strategies as st

from support import schemas
from support.workspace import GIT_ENV as WORKSPACE_GIT_ENV
from support.workspace import SRC

TASK_SCRIPT = Path(__file__).with_name("fuzz_task.js")
GIT_ENV = {**WORKSPACE_GIT_ENV, "GIT_CONFIG_GLOBAL": "/dev/null"}
RACY_S = 0.06  # past vx's 50 ms racy window: an edit just before a run withholds its save (KEY-21)

# Patterns the generator can produce besides the plain ones, each behind a switch.
FEATURES = {
    "source_only": "a dependency with no build task (source-only) whose sources its dependant reads (WS-19)",
    "ignored_input": "a gitignored file named as a literal input (.env)",
    "turbo_class": "turbo.json inputs with a character class (src/**/*.[jt]s)",
    "framework_env": "turbo framework env: NEXT_PUBLIC_* read by the build of a Next.js package",
    "symlink_dir": "an in-repo symlink to a directory under a task's inputs (src/shared -> shared/)",
    "symlink_file": "an in-repo symlink to a file under a task's inputs (src/link.js -> shared/common.js)",
    "late_writer": "a process the task leaves behind in its process group (`writer &`), writing an output later",
    "detached_writer": "the same process, detached into a session of its own (setsid): out of a process group's reach",
    "same_content": "a task that rewrites an input with the bytes it has (a formatter)",
}
# The ones vx gets wrong today: the bounded run leaves them
# out (VX_FUZZ_FEATURES=all turns them on). Drop a name here when its fix lands.
KNOWN_OPEN: set[str] = set()

IGNORED_DIRS = ("node_modules", "dist", ".vx", "tmp")
GITIGNORE = ["node_modules/", "dist/", ".vx/", "tmp/", "*.log", ".env"]
CONFIG_FILES = ("package.json", "vx.config.json", "turbo.json", "package-lock.json", ".gitignore")
IGNORE_TOGGLES = (
    "skip.js",
    "notes.txt",
    "*.ts",
)  # rules a mutation adds to or drops from .gitignore
ENV_NAMES = ("STAGE", "MODE", "NEXT_PUBLIC_API")
ENV_VALUES = (None, "", "dev", "prod")
# Project-relative paths the generator may add (gitignored ones included: they must change nothing).
ADD_SLOTS = (
    "src/a.js",
    "src/b.js",
    "src/sub/deep.js",
    "src/skip.js",
    "src/types.ts",
    "src/debug.log",
    "src/tmp/gen.js",
    "README.md",
    "notes.txt",
    "config/app.json",
    ".env",
    "src/with space.js",
    "src/ünï.js",
)
VX_INPUTS = (
    "src/**",
    "src/*.js",
    "src",
    "src/**/*.{js,ts}",
    "config/*.json",
    "README.md",
    "package.json",
    "!src/skip.js",
    "notes.txt",
    "**",
    "$TURBO_ROOT$/shared/**",
)
TURBO_INPUTS = (
    "$TURBO_DEFAULT$",
    "src/**",
    "src/*.js",
    "README.md",
    "config/*.json",
    "!src/skip.js",
    "**",
    "$TURBO_ROOT$/shared/**",
)
ROOT_PREFIX = (
    "$TURBO_ROOT$/"  # a root-relative input: turbo's spelling, vx's `inputs.workspaceFiles`
)


# ---------------------------------------------------------------- the case


@dataclass(frozen=True)
class Project:
    deps: tuple[int, ...]  # indices of earlier projects
    source_only: bool = False
    inputs: tuple[str, ...] | None = ("src/**",)  # None: turbo's default (every file)
    env: tuple[str, ...] = ()
    files: tuple[tuple[str, str], ...] = ()
    override: bool = True  # turbo: its own `pN#build` in turbo.json
    formatter: bool = False
    late: bool = False
    detached: bool = False  # the late writer left the task's process group
    framework: bool = False
    # "inner": src/alias.js -> a.js, beside it (its target is an input too, or missing: dangling);
    # "file" or "dir": src/link.js or src/shared, into the root's shared/
    link: str | None = None


@dataclass(frozen=True)
class Step:
    op: str
    a: int = 0
    b: int = 0
    run: str = "plain"  # summary | plain | dry
    settle: bool = False  # one more plain run after it: a warm run that writes a receipt
    where: int = 0  # scoped: which project's directory


@dataclass(frozen=True)
class Case:
    turbo: bool
    projects: tuple[Project, ...]
    env: tuple[tuple[str, str], ...]
    steps: tuple[Step, ...]


@st.composite
def cases(draw, features: frozenset[str]) -> Case:
    """A workspace and the mutations to make to it; `features` adds the switched patterns."""
    turbo = draw(st.booleans(), label="turbo")
    n = draw(st.integers(2, 4), label="projects")
    menu = input_menu(turbo, features)
    projects = []
    for i in range(n):
        deps = (
            tuple(sorted(draw(st.sets(st.integers(0, i - 1), max_size=2), label="deps")))
            if i
            else ()
        )
        files = draw(
            st.lists(
                st.tuples(st.sampled_from(ADD_SLOTS), st.sampled_from(("x", "y", "zz"))),
                min_size=1,
                max_size=4,
                unique_by=lambda f: f[0],
            ),
            label="files",
        )
        if turbo and draw(st.booleans(), label="default inputs"):
            inputs = None
        else:
            inputs = positive(
                draw(
                    st.lists(st.sampled_from(menu), min_size=1, max_size=3, unique=True),
                    label="inputs",
                )
            )
        projects.append(
            Project(
                deps=deps,
                source_only="source_only" in features
                and i < n - 1
                and draw(st.booleans(), label="source-only"),
                inputs=inputs,
                env=tuple(
                    draw(
                        st.lists(st.sampled_from(ENV_NAMES[:2]), max_size=2, unique=True),
                        label="env",
                    )
                ),
                files=tuple(sorted(files)),
                override=not turbo or draw(st.booleans(), label="override"),
                formatter="same_content" in features and draw(st.booleans(), label="formatter"),
                late=(late := "late_writer" in features and draw(st.booleans(), label="late")),
                detached=late
                and "detached_writer" in features
                and draw(st.booleans(), label="detached"),
                framework=turbo
                and "framework_env" in features
                and draw(st.booleans(), label="framework"),
                link=draw(
                    st.sampled_from(
                        [None, "inner"] + [k for k in ("file", "dir") if f"symlink_{k}" in features]
                    ),
                    label="link",
                ),
            )
        )
    env = draw(
        st.dictionaries(st.sampled_from(ENV_NAMES), st.sampled_from(ENV_VALUES[1:]), max_size=2),
        label="env",
    )
    # The everyday edits are listed twice: they are what most keys turn on.
    ops = ["edit", "add", "delete", "commit", "env", "config"] * 2 + [
        "touch",
        "rewrite",
        "lock",
        "chmod",
        "manifest",
        "ignore",
        "dep",
        "revert",
        "tamper",
        "stage",
        "intent",
        "assume",
        "untrack",
        "sneak",
        "noop",
    ]
    steps = draw(
        st.lists(
            st.builds(
                Step,
                st.sampled_from(ops),
                st.integers(0, 40),
                st.integers(0, 40),
                st.sampled_from(("summary", "plain", "dry", "scoped")),
                st.booleans(),
                st.integers(0, 3),
            ),
            min_size=1,
            max_size=8,
        ),
        label="steps",
    )
    return Case(turbo, tuple(projects), tuple(sorted(env.items())), tuple(steps))


# ---------------------------------------------------------------- the workspace


class Failure(AssertionError):
    """A run the oracle disagrees with; one subclass per kind, so hypothesis shrinks each apart."""


class StaleHit(Failure):
    pass


class WrongOutput(
    Failure
):  # a task that ran wrote something else than it reads (harness or vx env)
    pass


class UnexpectedHit(Failure):
    pass


class NeedlessMiss(Failure):
    pass


class WithheldSave(Failure):
    pass


class WrongReport(Failure):  # vx's status for a task is not what the task's own run log shows
    pass


class WrongPrediction(Failure):  # --dry=json
    pass


class RunFailed(Failure):
    pass


@dataclass
class Workspace:
    case: Case
    root: Path
    features: frozenset[str] = frozenset()
    env: dict[str, str] = field(default_factory=dict)
    salts: dict[int, int] = field(default_factory=dict)
    inputs: dict[int, tuple[str, ...] | None] = field(default_factory=dict)
    envs: dict[int, tuple[str, ...]] = field(default_factory=dict)
    global_def: dict = field(default_factory=dict)  # turbo: the shared `build`
    indent: int = 2
    saved: set[str] = field(default_factory=set)  # key materials vx has stored
    rules: list[str] = field(default_factory=lambda: list(GITIGNORE))
    deps: dict[int, tuple[int, ...]] = field(default_factory=dict)
    committed: tuple = ()  # the config state at the last commit, for `git checkout -- .`
    log: list[str] = field(default_factory=list)

    # -- names and files

    def name(self, i: int) -> str:
        return f"p{i}"

    def pdir(self, i: int) -> Path:
        return self.root / "packages" / self.name(i)

    def built(self, i: int) -> bool:
        return not self.case.projects[i].source_only

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args],
            cwd=self.root,
            env={**os.environ, **GIT_ENV},
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    def create(self) -> None:
        self.root.mkdir(parents=True)
        (self.root / "tools").mkdir()
        shutil.copy(TASK_SCRIPT, self.root / "tools" / "build.js")
        self._write(
            "package.json",
            json.dumps({"name": "root", "private": True, "workspaces": ["packages/*"]}),
        )
        self._write(".gitignore", "\n".join(self.rules) + "\n")
        self._write(
            "package-lock.json", json.dumps({"name": "root", "lockfileVersion": 3, "packages": {}})
        )
        self._write("README.md", "root\n")
        self._write("shared/common.js", "common\n")
        self.env = dict(self.case.env)
        self.global_def = {"dependsOn": ["^build"], "outputs": ["dist/**"], "inputs": ["src/**"]}
        for i, p in enumerate(self.case.projects):
            self.salts[i], self.inputs[i], self.envs[i], self.deps[i] = 0, p.inputs, p.env, p.deps
            for rel, content in p.files:
                self._write(f"packages/{self.name(i)}/{rel}", content + "\n")
            if p.link == "inner":
                (self.pdir(i) / "src").mkdir(parents=True, exist_ok=True)
                os.symlink("a.js", self.pdir(i) / "src" / "alias.js")
            elif p.link == "file":
                (self.pdir(i) / "src").mkdir(parents=True, exist_ok=True)
                os.symlink("../../../shared/common.js", self.pdir(i) / "src" / "link.js")
            elif p.link == "dir":
                (self.pdir(i) / "src").mkdir(parents=True, exist_ok=True)
                os.symlink("../../../shared", self.pdir(i) / "src" / "shared")
            self.write_config(i)
        self.write_turbo()
        self.git("init", "-q", "-b", "main")
        self.commit()

    def _write(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def commit(self) -> None:
        self.committed = copy.deepcopy(
            (
                self.salts,
                self.inputs,
                self.envs,
                self.global_def,
                self.indent,
                self.rules,
                self.deps,
            )
        )
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", "state")

    def command(self, i: int) -> str:
        p = self.case.projects[i]
        flags = (
            (" format" if p.formatter else "")
            + (" late" if p.late else "")
            + (" detached" if p.detached else "")
        )
        return f"node ../../tools/build.js s{self.salts[i]}{flags}"

    def manifest(self, i: int, description: str = "") -> dict:
        p = self.case.projects[i]
        deps = {self.name(d): "workspace:*" for d in self.deps[i]}
        if p.framework:
            deps["next"] = "14.2.0"
        data = {"name": self.name(i), "version": "1.0.0", "dependencies": deps}
        if description:
            data["description"] = description
        if self.case.turbo and self.built(i):
            data["scripts"] = {"build": self.command(i)}
        return data

    def task(self, i: int) -> dict:
        """The declaration as written: vx.config.json's build, or the turbo.json definition."""
        if self.case.turbo:
            if not self.case.projects[i].override or not self.built(i):
                return self.global_def  # a source-only package gets no `pN#build` of its own
            d = {"dependsOn": ["^build"], "outputs": ["dist/**"]}
            if self.inputs[i] is not None:
                d["inputs"] = list(self.inputs[i])
            if self.envs[i]:
                d["env"] = list(self.envs[i])
            return d
        inputs = {"files": [g for g in self.inputs[i] if not g.startswith(ROOT_PREFIX)]}
        if len(inputs["files"]) < len(self.inputs[i]):
            inputs["workspaceFiles"] = [
                g.removeprefix(ROOT_PREFIX) for g in self.inputs[i] if g.startswith(ROOT_PREFIX)
            ]
        if self.envs[i]:
            inputs["env"] = list(self.envs[i])
        t = {
            "exec": {"command": self.command(i)},
            "dependsOn": ["^build"],
            "cache": {"inputs": inputs, "outputs": {"files": ["dist/**"]}},
        }
        if self.envs[i]:
            t["exec"]["env"] = {"passThrough": list(self.envs[i])}
        return t

    def write_config(self, i: int) -> None:
        pkg = self.pdir(i) / "package.json"
        old = json.loads(pkg.read_text()).get("description", "") if pkg.exists() else ""
        self._write(
            f"packages/{self.name(i)}/package.json", json.dumps(self.manifest(i, old), indent=2)
        )
        if not self.case.turbo and self.built(i):
            self._write(
                f"packages/{self.name(i)}/vx.config.json",
                json.dumps({"tasks": {"build": self.task(i)}}, indent=self.indent),
            )

    def write_turbo(self) -> None:
        if not self.case.turbo:
            return
        tasks = {"build": self.global_def}
        for i, p in enumerate(self.case.projects):
            if p.override and self.built(i):
                tasks[f"{self.name(i)}#build"] = self.task(i)
        self._write("turbo.json", json.dumps({"tasks": tasks}, indent=self.indent))

    def editable(self) -> list[str]:
        """Every file a mutation may touch (ignored and untracked included), configs left out."""
        found = []
        for dirpath, dirs, files in os.walk(self.root):
            rel_dir = os.path.relpath(dirpath, self.root)
            dirs[:] = sorted(
                d
                for d in dirs
                if d not in (".git", ".vx", "dist", "node_modules", "tools")
                and not os.path.islink(os.path.join(dirpath, d))
            )
            for f in files:
                rel = os.path.normpath(os.path.join(rel_dir, f))
                if f not in CONFIG_FILES and os.path.exists(
                    os.path.join(self.root, rel)
                ):  # not a dangling link
                    found.append(rel)
        return sorted(found)

    # -- mutations

    def apply(self, step: Step) -> str:
        """Apply one mutation; say what it did, for the failure report."""
        files = self.editable()
        n = len(self.case.projects)
        op = step.op
        if op in ("edit", "delete", "touch", "rewrite", "chmod", "sneak") and not files:
            op = "add"
        if op == "edit":
            rel = files[step.a % len(files)]
            text = f"edit{step.b}\n" if step.b % 8 else ""
            (self.root / rel).write_text(text)
            return f"edit {rel} = {text!r}"
        if (
            op == "sneak"
        ):  # new bytes of the same length, the old mtime put back (cp -p, rsync -a): ctime moves
            rel = files[step.a % len(files)]
            path = self.root / rel
            before = path.stat()
            data = path.read_bytes()
            path.write_bytes(bytes((c + 1 - 97) % 26 + 97 if 97 <= c < 123 else c for c in data))
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns), follow_symlinks=True)
            return f"rewrite {rel} to other bytes of its length, mtime kept"
        if op == "add":
            slot = ADD_SLOTS[step.b % len(ADD_SLOTS)]
            where = (
                "shared" if step.a % 5 == 4 else f"packages/{self.name(step.a % n)}"
            )  # shared/: the root's
            rel = f"{where}/{slot}"
            self._write(rel, f"add{step.b}\n")
            return f"add {rel} = add{step.b}"
        if op == "delete":
            rel = files[step.a % len(files)]
            (self.root / rel).unlink()
            return f"delete {rel}"
        if op == "commit":
            self.commit()
            return "git add -A && git commit"
        if op == "env":
            name, value = ENV_NAMES[step.a % len(ENV_NAMES)], ENV_VALUES[step.b % len(ENV_VALUES)]
            if value is None:
                self.env.pop(name, None)
                return f"unset {name}"
            self.env[name] = value
            return f"{name}={value!r}"
        if op == "touch":
            rel = files[step.a % len(files)]
            os.utime(self.root / rel)
            return f"touch {rel}"
        if op == "rewrite":
            rel = files[step.a % len(files)]
            path = self.root / rel
            path.write_bytes(path.read_bytes())
            return f"rewrite {rel} with its own bytes"
        if op == "chmod":
            rel = files[step.a % len(files)]
            path = self.root / rel
            if path.is_symlink():
                return f"chmod skipped ({rel} is a symlink)"
            mode = path.stat().st_mode ^ 0o111
            path.chmod(mode)
            return f"chmod {oct(mode & 0o777)} {rel}"
        if op == "lock":
            self._write(
                "package-lock.json",
                json.dumps(
                    {
                        "name": "root",
                        "lockfileVersion": 3,
                        "packages": {"": {"version": f"1.{step.b}.0"}},
                    }
                ),
            )
            return f"lockfile version 1.{step.b}.0"
        if op == "manifest":
            i = step.a % n
            self._write(
                f"packages/{self.name(i)}/package.json",
                json.dumps(self.manifest(i, f"d{step.b}"), indent=2),
            )
            return f"{self.name(i)}/package.json description d{step.b}"
        if op == "config":
            return self._edit_config(step.a % n, step.b)
        if op == "ignore":
            rule = IGNORE_TOGGLES[step.b % len(IGNORE_TOGGLES)]
            self.rules = (
                [r for r in self.rules if r != rule] if rule in self.rules else self.rules + [rule]
            )
            self._write(".gitignore", "\n".join(self.rules) + "\n")
            return f".gitignore {'drops' if rule not in self.rules else 'adds'} {rule}"
        if op == "dep":
            i = step.a % n
            if i == 0:
                return "nothing (p0 can have no edge)"
            d = step.b % i
            self.deps[i] = tuple(sorted(set(self.deps[i]) ^ {d}))
            self.write_config(i)
            return f"{self.name(i)} dependencies now {[self.name(x) for x in self.deps[i]]}"
        if op == "tamper":  # outputs are not inputs: the next run restores them and runs nothing
            i = step.a % n
            dist = self.pdir(i) / "dist"
            if not dist.is_dir():
                return f"nothing ({self.name(i)} has no dist/)"
            if step.b % 3 == 0:
                (dist / "out.txt").unlink(missing_ok=True)
                return f"delete {self.name(i)}/dist/out.txt"
            target = dist / ("out.txt" if step.b % 3 == 1 else "stray.txt")
            target.write_text("tampered\n")
            return f"write {self.name(i)}/dist/{target.name}"
        if op in ("stage", "intent", "assume", "untrack"):
            return self._git_op(op, step)
        if op == "revert":
            self.git("checkout", "HEAD", "--", ".")  # from HEAD: the index may hold staged edits
            (
                self.salts,
                self.inputs,
                self.envs,
                self.global_def,
                self.indent,
                self.rules,
                self.deps,
            ) = copy.deepcopy(self.committed)
            return "git checkout HEAD -- . (tracked files back to HEAD)"
        return "nothing"

    def _git_op(self, op: str, step: Step) -> str:
        """Index states a file can be in besides clean and untracked: each changes no content."""
        if op == "stage":
            self.git("add", "-A")
            return "git add -A (staged, not committed)"
        listing = ["ls-files", "-z"] + (["-o", "--exclude-standard"] if op == "intent" else [])
        files = sorted(
            f
            for f in self.git(*listing).split("\0")
            if f and not f.startswith("tools/") and os.path.basename(f) not in CONFIG_FILES
        )
        if not files:
            return f"nothing ({op}: no file)"
        rel = files[step.a % len(files)]
        if op == "intent":
            self.git("add", "-N", "--", rel)
            return f"git add -N {rel}"
        if op == "untrack":
            self.git("rm", "-q", "--cached", "--", rel)
            return f"git rm --cached {rel}"
        flag = ("--assume-unchanged", "--skip-worktree")[step.b % 2]
        self.git("update-index", flag, "--", rel)
        return f"git update-index {flag} {rel}"

    def _edit_config(self, i: int, b: int) -> str:
        what = b % 4
        menu = input_menu(self.case.turbo, self.features)
        shared = self.case.turbo and (not self.case.projects[i].override or not self.built(i))
        if what == 0:
            self.indent = 4 if self.indent == 2 else 2
            desc = "reformat every config"
        elif what == 1 and not shared:
            self.salts[i] += 1
            desc = f"{self.name(i)} command salt s{self.salts[i]}"
        elif what == 2:
            glob = menu[(b // 4) % len(menu)]
            current = list((self.global_def.get("inputs") if shared else self.inputs[i]) or [])
            new = list(
                positive([g for g in current if g != glob] if glob in current else current + [glob])
            )
            if shared:
                self.global_def = {**self.global_def, "inputs": new}
            else:
                self.inputs[i] = tuple(new)
            desc = f"{'build' if shared else self.name(i)} inputs {new}"
        else:
            name = ENV_NAMES[(b // 4) % 2]
            current = list((self.global_def.get("env") if shared else self.envs[i]) or [])
            new = [e for e in current if e != name] if name in current else current + [name]
            if shared:
                self.global_def = {k: v for k, v in {**self.global_def, "env": new}.items() if v}
            else:
                self.envs[i] = tuple(new)
            desc = f"{'build' if shared else self.name(i)} env {new}"
        for j in range(len(self.case.projects)):
            self.write_config(j)
        self.write_turbo()
        return "config: " + desc

    # -- the oracle

    def walk(self, base: Path) -> list[str]:
        """The non-ignored files under base: .gitignore's rules in the forms the generator writes
        (`dir/`, `*.ext`, `name`, anywhere), except that a tracked file is never ignored."""
        dirs = {r[:-1] for r in self.rules if r.endswith("/")}
        files = [r for r in self.rules if not r.endswith("/")]
        tracked = set(self.git("ls-files", "-z").split("\0"))

        def ignored(rel: str, abs_path: str) -> bool:
            parts = rel.split("/")
            if any(p in dirs for p in parts[:-1]):
                return True
            if not any(
                parts[-1].endswith(r[1:]) if r.startswith("*") else parts[-1] == r for r in files
            ):
                return False
            return os.path.relpath(abs_path, self.root) not in tracked

        return walk(base, ignored)

    def declared(self, i: int) -> tuple[list[str], list[str], bool, list[str]]:
        """(input globs, env names, character classes?, root-relative globs) as the task declares them."""
        t = self.task(i)
        if self.case.turbo:
            # `"inputs": []` is turbo's default set, as no `inputs` (turbo 2.11 --dry=json, measured)
            globs = ["**" if g == "$TURBO_DEFAULT$" else g for g in t.get("inputs") or ["**"]]
            return (
                [g for g in globs if not g.startswith(ROOT_PREFIX)],
                list(t.get("env", [])),
                True,
                [g.removeprefix(ROOT_PREFIX) for g in globs if g.startswith(ROOT_PREFIX)],
            )
        inputs = t["cache"]["inputs"]
        return inputs["files"], inputs.get("env", []), False, inputs.get("workspaceFiles", [])

    def reads_root(self, i: int) -> list[tuple[str, bytes, str]]:
        """(path, bytes, kind) of every root-relative input of project i's build, sorted."""
        _, _, classes, globs = self.declared(i)
        if not globs:
            return []
        # turbo's $TURBO_ROOT$/ globs are explicit: they match the files on disk, ignored ones too
        if classes:
            files = walk(self.root, lambda _r, _a: False, skip=("node_modules", ".vx", "dist"))
        else:
            files = self.walk(self.root)
        return [
            (rel, (self.root / rel).read_bytes(), kind(self.root / rel))
            for rel in select(files, globs, classes)
        ]

    def reads(self, i: int) -> list[tuple[str, bytes, str]]:
        """(path, bytes, kind) of every file project i's build reads, project-relative, sorted."""
        globs, _, classes, _ = self.declared(i)
        base = self.pdir(i)
        everything = self.walk(base)
        chosen = set(select(everything, globs, classes))
        if (
            self.case.turbo
        ):  # turbo's globs but $TURBO_DEFAULT$ match the files on disk, ignored ones too
            raw = [g for g in self.task(i).get("inputs") or [] if not g.startswith(ROOT_PREFIX)]
            explicit = [g for g in raw if g != "$TURBO_DEFAULT$"]
            if any(not g.startswith("!") for g in explicit):
                on_disk = walk(base, lambda _rel, _abs: False, skip=("node_modules", ".vx", "dist"))
                taken_back = [g for g in raw if g.startswith("!")]
                chosen |= set(select(on_disk, explicit + taken_back, classes))
        for g in globs:  # a literal input is read even when ignored
            if not g.startswith("!") and not re.search(r"[*?{\[]", g) and (base / g).is_file():
                chosen.add(g)
        return [(rel, (base / rel).read_bytes(), kind(base / rel)) for rel in sorted(chosen)]

    def env_values(self, i: int) -> list[tuple[str, str | None]]:
        names = self.declared(i)[1]
        return [(e, self.env.get(e)) for e in sorted(names)]

    def framework_env(self, i: int) -> list[tuple[str, str]]:
        """What a Next.js build inlines: every NEXT_PUBLIC_* variable it sees (turbo keys them)."""
        if not self.case.projects[i].framework:
            return []
        return [(e, v) for e, v in sorted(self.env.items()) if e.startswith("NEXT_PUBLIC_")]

    def expected(self, i: int) -> str:
        """What project i's build writes to dist/out.txt if it ran now."""
        lines = [f"task {self.name(i)} salt s{self.salts[i]}"]
        for rel, data, _ in self.reads(i):
            lines += [f"file {rel}", data.decode()]
        for rel, data, _ in self.reads_root(i):
            lines += [f"ws {rel}", data.decode()]
        for e, v in self.env_values(i):
            lines.append(f"env {e} unset" if v is None else f"env {e}={v}")
        lines += [f"env {e}={v}" for e, v in self.framework_env(i)]
        for d in sorted(self.deps[i], key=self.name):
            if self.built(d):
                lines += [f"up {self.name(d)}", self.expected(d)]
            else:  # under turbo.json, only the sources its no-op's definition picks (fuzz_task.js)
                src = self.pdir(d) / "src"
                keyed = {r for r, _, _ in self.reads(d)} if self.case.turbo else None
                for rel in self.walk(src):
                    if keyed is None or f"src/{rel}" in keyed:
                        lines += [f"src {self.name(d)} {rel}", (src / rel).read_text()]
        return "\n".join(lines) + "\n"

    def expected_files(self, i: int) -> dict[str, str]:
        return {"out.txt": self.expected(i)}  # vx stops every late writer before the save

    def material(self, i: int) -> str:
        """The key as the docs define it, as a digest of what goes in (independent of vx's hashing)."""
        parts: list = [
            self.name(i),
            (self.root / "package-lock.json").read_bytes().hex(),
            (self.pdir(i) / "package.json").read_bytes().hex(),
        ]
        # turbo keys a package's task whose script it lacks (`<NONEXISTENT>` in --dry=json) as
        # any other: by the definition that applies (the shared `build`), its globs matched as
        # turbo matches them (gitignored files too), its env and framework variables — so a
        # source-only package under turbo.json is keyed on its inputs, not on all of its files.
        if self.built(i) or self.case.turbo:
            t = self.task(i)
            parts += [
                json.dumps(t, sort_keys=True),
                [(p, d.hex(), k) for p, d, k in self.reads(i)],
                [(p, d.hex(), k) for p, d, k in self.reads_root(i)],
                self.env_values(i),
                self.framework_env(i),
            ]
        else:  # WS-19: an implicit build keyed on every file of the project
            base = self.pdir(i)
            parts.append(
                [(p, (base / p).read_bytes().hex(), kind(base / p)) for p in self.walk(base)]
            )
        parts.append(sorted(self.material(d) for d in self.deps[i]))
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

    # -- running vx

    def vx(self, *args: str, timing: bool = False, cwd: str = "") -> subprocess.CompletedProcess:
        env = {
            k: v
            for k, v in os.environ.items()
            if (not k.startswith(("VX_", "CI", "NEXT_PUBLIC_")) or k == "VX_SHARED_STORE")
            and k not in ENV_NAMES
        }
        # A short kill grace: a late writer waits on the gate, so vx stops it after the grace whatever
        # its length; a short one only spares the fuzzer's time.
        env.update({"PYTHONPATH": SRC, "NO_COLOR": "1", "VX_KILL_GRACE_MS": "100", **self.env})
        if timing:
            env["VX_TIMING"] = "1"
        proc = subprocess.run(
            [sys.executable, "-m", "vx", *args],
            cwd=self.root / cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        schemas.check_output(args, proc.stdout)  # --dry=json and the summary, to their schemas
        schemas.check_summaries(args, self.root / cwd)
        return proc

    def upstream(self, i: int) -> set[int]:
        """i and every project its `^build` reaches, source-only ones passed through."""
        seen = {i}
        for d in self.deps[i]:
            seen |= self.upstream(d)
        return seen

    def check_run(self, mode: str, what: str, where: int = 0) -> None:
        """Run `vx run build` in `mode` and hold every task it selects to the oracle: from the
        root (every project), or, `scoped`, from one project's directory (it and its upstream)."""
        built = [i for i in range(len(self.case.projects)) if self.built(i)]
        cwd = ""
        if mode == "scoped":
            here = built[where % len(built)]
            cwd = f"packages/{self.name(here)}"
            built = sorted(self.upstream(here) & set(built))
        materials = {self.name(i): self.material(i) for i in built}
        must_run = {n for n, m in materials.items() if m not in self.saved}
        problems = []
        if mode == "dry":
            proc = self.vx("run", "build", "--dry=json")
            if proc.returncode != 0:
                raise self.fail(
                    RunFailed, what, f"--dry=json exited {proc.returncode}: {proc.stderr}"
                )
            predicted = {t["project"]: t["predicted"] for t in json.loads(proc.stdout)["tasks"]}
            for n in sorted(materials):
                want = "miss" if n in must_run else "hit-local"
                if predicted.get(n) != want:
                    problems.append(
                        (
                            WrongPrediction,
                            f"--dry=json predicts {predicted.get(n)} for {n}#build, the oracle {want}",
                        )
                    )
        runs_log = self.root.parent / "runs.log"
        runs_log.write_text("")
        summary = self.root.parent / "summary.json"
        summary.unlink(missing_ok=True)
        summarize = mode in ("summary", "scoped")
        args = ["run", "build"] + ([f"--summarize={summary}"] if summarize else [])
        time.sleep(RACY_S)
        proc = self.vx(*args, timing=not summarize, cwd=cwd)
        self.finish_late_writers()
        if proc.returncode != 0:
            raise self.fail(
                RunFailed,
                what,
                f"vx run build exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}",
            )
        ran = set(runs_log.read_text().split())
        if summarize:
            reported = {
                t["project"]
                for t in json.loads(summary.read_text())["tasks"]
                if t["cache"] == "miss"
            }
        else:
            reported = {
                line.split()[-1].split("#")[0]
                for line in proc.stderr.splitlines()
                if line.startswith("⏺") and " miss " in line
            }
            if "receipt check" in proc.stderr:
                event("replayed from a receipt")
        if reported != ran:
            problems.append(
                (
                    WrongReport,
                    f"vx reports {sorted(reported)} as run, the run log says {sorted(ran)}",
                )
            )
        for n in sorted(materials):
            if n in ran and n not in must_run:
                problems.append(
                    (
                        NeedlessMiss,
                        f"needless miss: {n}#build ran, but nothing it declares changed since a saved run",
                    )
                )
            if n not in ran and n in must_run:
                problems.append(
                    (
                        UnexpectedHit,
                        f"unexpected hit: {n}#build did not run, but what it declares changed",
                    )
                )
        for line in proc.stderr.splitlines():
            if "not saved" in line:
                problems.append((WithheldSave, f"vx withheld a save: {line.strip()}"))
        for i in built:
            have = dist_files(self.pdir(i) / "dist")
            want = self.expected_files(i)
            if have != want:
                kind = (
                    (StaleHit, "stale hit")
                    if self.name(i) not in ran
                    else (WrongOutput, "wrong output from a run")
                )
                problems.append(
                    (
                        kind[0],
                        f"{kind[1]}: {self.name(i)}/dist is {have!r}, running it now gives {want!r}",
                    )
                )
        replay = " (replayed from a receipt)" if "receipt check" in proc.stderr else ""
        where = f" in {cwd}" if cwd else ""
        self.log.append(
            f"  vx run build{' --summarize' if summarize else ''}{where}{replay}: ran {sorted(ran)}"
        )
        if problems:
            worst = min((p[0] for p in problems), key=SEVERITY.index)
            raise self.fail(
                worst, what, "\n".join(p[1] for p in problems) + f"\n--- vx stderr:\n{proc.stderr}"
            )
        self.saved.update(materials[n] for n in ran)

    def finish_late_writers(self) -> None:
        """Open the gate for the processes tasks left behind (late_writer): vx stopped each before
        the save, so none writes, and the oracle expects no late file."""
        late = [p for p in self.case.projects if p.late]
        if not late:
            return
        gate, late_log = self.root.parent / "gate", self.root.parent / "late.log"
        gate.write_text("")
        # vx stopped every writer before reading outputs, detached ones too (one that survived
        # would write once the gate opens, and the next check sees its file).
        gate.unlink()
        late_log.unlink(missing_ok=True)

    def fail(self, kind: type[Failure], what: str, message: str) -> Failure:
        return kind(f"after {what}:\n{message}\n--- steps:\n" + "\n".join(self.log))


SEVERITY = [
    RunFailed,
    StaleHit,
    WrongOutput,
    UnexpectedHit,
    NeedlessMiss,
    WithheldSave,
    WrongReport,
    WrongPrediction,
]


def positive(globs: list[str]) -> tuple[str, ...]:
    """Globs vx accepts: a list of `!` entries alone is refused (it selects nothing)."""
    if any(g.startswith("!") for g in globs) and all(
        g.startswith(("!", ROOT_PREFIX)) for g in globs
    ):
        return ("src/**", *globs)
    return tuple(globs)


def input_menu(turbo: bool, features: frozenset[str]) -> tuple[str, ...]:
    if turbo:
        return TURBO_INPUTS + (("src/**/*.[jt]s",) if "turbo_class" in features else ())
    return VX_INPUTS + ((".env",) if "ignored_input" in features else ())


def walk(base: Path, ignored, skip: tuple[str, ...] = IGNORED_DIRS) -> list[str]:
    """Every file under base that `ignored(rel, abs)` keeps, following symlinks (as a compiler
    reads), base-relative, sorted."""
    out: list[str] = []

    # Only the directories above guard against a link cycle: a directory already walked through a
    # link elsewhere (packages/p1/src/shared -> shared) is still walked where it really is.
    def go(abs_dir: str, rel: str, above: frozenset[str]) -> None:
        real = os.path.realpath(abs_dir)
        if real in above or not os.path.isdir(abs_dir):
            return
        for entry in sorted(os.listdir(abs_dir)):
            r = f"{rel}/{entry}" if rel else entry
            a = os.path.join(abs_dir, entry)
            if os.path.isdir(a):
                if entry not in skip and entry != ".git":
                    go(a, r, above | {real})
            elif os.path.exists(a) and not ignored(r, a):
                out.append(r)

    go(str(base), "", frozenset())
    return sorted(out)


def glob_regex(glob: str, classes: bool) -> re.Pattern:
    out = []
    segs = glob.split("/")
    for n, seg in enumerate(segs):
        last = n == len(segs) - 1
        if seg == "**":
            out.append(".*" if last else "(?:[^/]*/)*")
            continue
        j = 0
        while j < len(seg):
            c = seg[j]
            if c == "*":
                out.append("[^/]*")
            elif c == "?":
                out.append("[^/]")
            elif c == "{":
                k = seg.index("}", j)
                out.append("(?:" + "|".join(re.escape(a) for a in seg[j + 1 : k].split(",")) + ")")
                j = k
            elif c == "[" and classes:
                k = seg.index("]", j)
                out.append("[" + seg[j + 1 : k] + "]")
                j = k
            else:
                out.append(re.escape(c))
            j += 1
        if not last:
            out.append("/")
    return re.compile("".join(out))


def matches(rel: str, glob: str, classes: bool) -> bool:
    if not re.search(r"[*?{]", glob) and not (classes and "[" in glob):
        return rel == glob or rel.startswith(glob + "/")
    return glob_regex(glob, classes).fullmatch(rel) is not None


def select(files: list[str], globs: list[str], classes: bool) -> list[str]:
    pos = [g for g in globs if not g.startswith("!")]
    neg = [g[1:] for g in globs if g.startswith("!")]
    return [
        f
        for f in files
        if any(matches(f, g, classes) for g in pos) and not any(matches(f, g, classes) for g in neg)
    ]


def kind(path: Path) -> str:
    if path.is_symlink():
        return "link"
    return "exec" if os.access(path, os.X_OK) else "file"


def dist_files(dist: Path) -> dict[str, str]:
    if not dist.is_dir():
        return {}
    return {str(p.relative_to(dist)): p.read_text() for p in sorted(dist.rglob("*")) if p.is_file()}


def describe(case: Case) -> str:
    """The generated workspace in a few lines, for a failure report."""
    lines = [
        ("turbo.json-only" if case.turbo else "vx.config.json")
        + f" workspace, env {dict(case.env)}"
    ]
    for i, p in enumerate(case.projects):
        lines.append(
            f"  p{i}: deps {[f'p{d}' for d in p.deps]} inputs {p.inputs} env {list(p.env)} "
            f"files {dict(p.files)}"
            + "".join(
                f" {k}" for k in ("source_only", "formatter", "late", "framework") if getattr(p, k)
            )
            + (f" link={p.link}" if p.link else "")
        )
    return "\n".join(lines)
