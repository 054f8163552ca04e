"""The corpus: public Turborepos, each pinned by commit, for bench/corpus.py.

Nothing of the repositories is kept here but what a user needs to fetch, install and exercise
them: `owner/name`, the 40-hex commit, the package manager the repository pins (installed from the
npm registry), the tasks, the files each edit of the matrix touches, and what the repository
exercises. Paths are repository-relative.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Bump:
    """A lockfile bump of one package's dependency: `package`'s `dep` resolved to `version`, the
    lockfile rewritten by the package manager (lockfile only where it can), the manifest put
    back — only the lockfile differs from the commit."""

    package: str  # the package's directory
    dep: str
    version: str


@dataclass(frozen=True)
class Repo:
    slug: str  # owner/name
    commit: str  # 40 hex
    pm: str  # name@version, as the root package.json's packageManager (or the lockfile) pins it
    tasks: tuple[str, ...]  # the main tasks, as turbo.json names them
    exercises: str
    edits: dict[str, str] = field(default_factory=dict)  # matrix kind -> file
    bump: Bump | None = None
    env: str | None = None  # a variable turbo.json declares (env / globalEnv)
    filter: tuple[str, ...] = ()  # --filter selectors both tools get
    install: tuple[str, ...] = ()  # the install command, when not the package manager's default
    node: str = ""  # the node major the repository asks for, when it matters
    notes: str = ""  # what was found installing it here
    skip: str = ""  # why it is listed but not measured

    @property
    def key(self) -> str:
        return self.slug.replace("/", "+")

    @property
    def pm_name(self) -> str:
        return self.pm.partition("@")[0]

    @property
    def pm_version(self) -> str:
        return self.pm.partition("@")[2].split("+")[0]


CORPUS: list[Repo] = [
    Repo(
        "juriadams/monorepo-starter",
        "51fa79aab70fe4b8976ac3b710dab4de1e925c82",
        "bun@1.2.8",
        ("build", "typecheck", "test"),
        "bun workspaces (bun.lock text lockfile, bunfig.toml), tsup builds, `bun test`, a persistent "
        "`dev` with bun --hot, tasks without outputs (typecheck, test)",
        edits={
            "source": "packages/core/src/index.ts",
            "config": "packages/core/tsup.config.ts",
            "root_config": "biome.json",
        },
        bump=Bump("packages/core", "@types/bun", "1.2.8"),
    ),
]
