"""The corpus: public Turborepos, each pinned by commit, for bench/corpus.py.

Nothing of the repositories is kept here but what a user needs to fetch, install and exercise
them: `owner/name`, the 40-hex commit, the package manager the repository pins (installed from the
npm registry), the tasks, the files each edit of the matrix touches, and what the repository
exercises. Paths are repository-relative.
"""

from __future__ import annotations

from collections.abc import Callable
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
    matrix_tasks: tuple[str, ...] = ()  # the tasks the matrix runs (default: all of `tasks`)
    filter: tuple[str, ...] = ()  # --filter selectors both tools get
    install: tuple[str, ...] = ()  # the install command, when not the package manager's default
    node: str = ""  # the node major the repository asks for, when it matters
    notes: str = ""  # what was found installing it here
    skip: str = ""  # why it is listed but not measured
    # a defect's workaround applied to the clone (both tools see it), committed there: the
    # root package.json's `name` suffixed with `-root` (vx refuses a member named like the root)
    rename_root: bool = False
    # files written into the clone (both tools see them) and committed there: a workaround for a
    # defect that would stop vx before anything is measured; `notes` says which
    patches: dict[str, str | Callable[[str], str]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """owner+name: the directory a user's checkout (or `fetch`'s bare clone) has."""
        return self.slug.replace("/", "+")

    @property
    def dirname(self) -> str:
        """owner__name: the work copies' directory (tsdown/rolldown mangle a `+` in a path)."""
        return self.slug.replace("/", "__")

    @property
    def pm_name(self) -> str:
        return self.pm.partition("@")[0]

    @property
    def pm_version(self) -> str:
        return self.pm.partition("@")[2].split("+")[0]


# evolu's packages left out of the install: their dependencies are a 404 here (notes)
SKIPPED_EVOLU = ("web", "react-web", "svelte", "react-native")

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
    Repo(
        "toss/suspensive",
        "c9ada0a088fe6fdb14440935edf01b7a0680d1ae",
        "pnpm@10.9.0",
        ("build", "ci:type", "ci:test", "ci:eslint"),
        "pnpm 10 catalogs, tsdown builds with `cache: false` (every cached task downstream of an "
        "uncached one: vx's late keys), ci:* tasks depending on the package's own build, vitest, "
        "globalEnv NODE_ENV, a persistent dev; docs and examples (next) filtered out",
        edits={
            "source": "packages/react/src/Suspense.tsx",
            "test": "packages/react/src/Suspense.spec.tsx",
            "config": "packages/react/tsconfig.json",
            "root_config": "knip.json",
        },
        bump=Bump("packages/react", "react-error-boundary", "6.1.0"),
        matrix_tasks=("ci:type", "ci:test", "ci:eslint"),  # build is `cache: false`
        node="24.12.0",
        env="NODE_ENV",
        filter=("./packages/*",),
    ),
    Repo(
        "segmentio/analytics-next",
        "0c4fa881d3a1c8653fbe434170ae1178fb49841d",
        "yarn@3.4.1",
        ("build", "tsc", "test", "lint"),
        "yarn berry 3 (nodeLinker node-modules, plugins, a patch), nested workspaces "
        "(packages/consent/*), explicit inputs with negations (`!*/**/__tests__/**`), "
        "`**/dist/**` outputs, webpack/tsup/tsc builds, jest, a task env var (COVERAGE)",
        edits={
            "source": "packages/core/src/index.ts",
            "test": "packages/core/src/events/__tests__/index.test.ts",
            "config": "packages/core/tsconfig.json",
            "root_config": "tsconfig.json",
        },
        bump=Bump("packages/core", "dset", "3.1.3"),
        env="COVERAGE",
        filter=("./packages/**",),
    ),
    Repo(
        "jaredpalmer/formik",
        "91475adbf33579561e580eceea0c031f4ec2e992",
        "yarn@1.22.22",
        ("build", "test", "lint"),
        "yarn classic workspaces (a v1 lockfile), tsdx (rollup + babel + jest) builds, tests and "
        "lint depending on `build` and `^build`, a persistent start; the next website filtered out",
        edits={
            "source": "packages/formik/src/Field.tsx",
            "test": "packages/formik/test/Field.test.tsx",
            "config": "packages/formik/tsconfig.build.json",
            "root_config": "tsconfig.base.json",
        },
        filter=("./packages/*",),
        skip="does not install from the npm registry: its yarn.lock resolves react-native from a "
        "GitHub tarball (expo/react-native sdk-33.0.0) and vscode-textmate from a git commit "
        "(`yarn install`: getaddrinfo ENOTFOUND github.com)",
    ),
    Repo(
        "code-shaper/code-shaper",
        "169f725ee2f568dd0a6e5c4a7090f997593606a3",
        "npm@10.2.3",
        ("build", "lint", "test"),
        "npm workspaces (lockfile v3), turbo 1.13 (`pipeline`, no packageManager field), a chain "
        "test → format → lint → build, tsc and esbuild builds copying templates, jest, "
        "`echo` test scripts, 20 packages in five workspace globs",
        edits={
            "source": "packages/shaper-utils/src/index.ts",
            "test": "packages/shaper-utils/src/ChangeCase.test.ts",
            "config": "packages/shaper-utils/jest.config.js",
            "root_config": ".prettierrc.js",
        },
        matrix_tasks=("test",),  # test → format → lint → build: every task
        bump=Bump("packages/shaper-utils", "fs-extra", "11.2.0"),
        rename_root=True,
    ),
    Repo(
        "vercel/edge-runtime",
        "77be36e84fbeb20ecd83ad065243ded353a3f803",
        "pnpm@8.4.0",
        ("build", "test"),
        "pnpm 8 (lockfile v6), a `pkg#build` with `cache: false` writing a tracked source, "
        "undeclared outputs (primitives' types/*.d.ts), ts-node/tsup/tsc builds, jest tests with "
        "`cache: false` depending on a package's own no-op build, globalEnv; docs (next) filtered out",
        edits={
            "source": "packages/format/src/index.ts",
            "test": "packages/format/tests/index.test.ts",
            "config": "packages/format/tsup.config.ts",
            "root_config": "jest.config.ts",
        },
        bump=Bump("packages/format", "tsup", "8.0.1"),
        env="NODE_VERSION",
        matrix_tasks=("build",),  # test is `cache: false`: it runs every time under both
        filter=("!@edge-runtime/docs",),
    ),
    Repo(
        "floating-ui/floating-ui",
        "12d94738472e922e1b3fa31b02b2b61b9ed77e6a",
        "pnpm@9.6.0",
        ("build", "typecheck"),
        "tsc -b project references (typecheck writes out-tsc of referenced packages: shared "
        "outputs), rollup builds, root-relative `packages/**` inputs in a package task, "
        "globalDependencies, `cache: false` tests and lint depending on config#build",
        edits={
            "source": "packages/utils/src/index.ts",
            "test": "packages/core/test/computePosition.test.ts",
            "config": "packages/core/tsconfig.json",
            "root_config": "config/tsconfig.base.json",
        },
        filter=("./packages/*", "config"),
        install=("pnpm", "install", "--frozen-lockfile", "--ignore-scripts"),
        notes="installed with --ignore-scripts: sharp 0.32's install script (the website's, filtered "
        "out) downloads libvips from GitHub",
    ),
    Repo(
        "evoluhq/evolu",
        "d57149f9470b6e77e99dc268046cb15cfdb58279",
        "pnpm@10.33.4",
        ("build",),
        "`tsc --build tsconfig.build.json` in every package, the build configs referencing each "
        "other (common <- react, nodejs, vue here) with `paths` to the referenced sources: a "
        "dependant's build checks its references' `dist`; build infos inside the declared "
        "`dist/**` under another name (`dist/.tsBuildInfo`), composite and incremental set in a "
        "shared config package, TypeScript 6, pnpm 10; apps and examples (next, expo, electron) "
        "left out",
        edits={
            "source": "packages/common/src/Type.ts",
            "config": "packages/common/tsconfig.build.json",
            "root_config": "prettier.config.mjs",
        },
        env="NODE_ENV",
        filter=("./packages/*", *(f"!@evolu/{p}" for p in SKIPPED_EVOLU)),
        install=(
            "pnpm",
            "install",
            "--frozen-lockfile",
            "--ignore-scripts",
            # the hoisted layout installs every project whatever the filter says
            "--config.node-linker=isolated",
            "--filter=!./examples/**",
            "--filter=!./apps/**",
            *(f"--filter=!@evolu/{p}" for p in SKIPPED_EVOLU),
        ),
        node="24.12.0",
        notes="installed with --ignore-scripts (the examples' electron and native modules "
        "download binaries from GitHub), pnpm's isolated layout (the hoisted one the repository "
        "sets for electron installs every project, whatever the filter) and without the "
        "examples, apps, web (and react-web and svelte, which build on it) and react-native: "
        "@types/sharedworker@0.0.221 and promise.try@2.0.1, in its lockfile, are a 404 here",
    ),
    Repo(
        "mongodb/leafygreen-ui",
        "62c8afdd773444319237f0164ebc545992b4ca0d",
        "pnpm@10.26.0",
        ("tsc",),
        "a `tsc` task in every package (`lg-build tsc`: `tsc --build` of a tsconfig referencing "
        "each workspace dependency, `paths` to their sources) whose outputs are only the "
        "declarations and the build info (`dist/**/*.d.ts`, `tsconfig.tsbuildinfo`) in a `dist` "
        "the `build` task (rollup) shares, `prebuild` tasks depending on `^build` and `^tsc`, a "
        "build tool that is a workspace package built first; ripple and polymorphic selected by "
        "name, with the tasks theirs depend on (15 tasks in 8 packages: lib <- polymorphic, "
        "tokens <- ripple, and the build tool)",
        edits={
            "source": "packages/lib/src/index.ts",
            "config": "packages/lib/tsconfig.json",
            "root_config": "prettier.config.js",
        },
        # the packages by name, not `<p>...`: turbo's `<p>...` takes the root's workspace
        # dependencies and theirs (30 packages, the CLI's slackbot among them), more than this
        # install holds; by name, both tools run these two and the tasks theirs depend on
        filter=("@leafygreen-ui/ripple", "@leafygreen-ui/polymorphic"),
        install=(
            "pnpm",
            "install",
            "--frozen-lockfile",
            "--ignore-scripts",
            "--filter=leafygreen-ui",
            "--filter=@leafygreen-ui/button...",
        ),
        node="22.21.0",
        notes="installed with --ignore-scripts and only for button and what it depends on (the "
        "root too), too little for turbo's `<p>...` (which takes the root's workspace "
        "dependencies), whole for the by-name selection: both tools plan the same 15 tasks "
        "with the same inputs (`--dry=json`); button's own `tsc` needs "
        "icon's prebuild, which failed here (`Cannot find module "
        "'@svgr/babel-plugin-replace-jsx-attribute-value'`, not tried under turbo)",
    ),
    Repo(
        "steven-tey/novel",
        "fa95098e66476c466faebb8211baa5869c101a9c",
        "pnpm@9.5.0",
        ("build", "typecheck", "lint"),
        "a next app and a tsup library, build depending on the package's own typecheck, `topo` "
        "tasks with no script (no-ops carrying ^topo), biome lint, `**/.env.*local` "
        "globalDependencies",
        edits={
            "source": "packages/headless/src/index.ts",
            "config": "packages/headless/tsup.config.ts",
            "root_config": "biome.json",
        },
        bump=Bump("packages/headless", "cmdk", "1.0.0"),
        rename_root=True,
    ),
    Repo(
        "pmndrs/react-spring",
        "3d2523de0f879e20869ab9add907540188bf6446",
        "yarn@3.8.5",
        ("build", "lint"),
        "yarn berry 3.8 with a patch, 13 tsup builds whose inputs climb out of the package "
        "(`../../tsup.config.base.ts`), src-only inputs (`src/**/*.ts`), a package turbo.json "
        "(docs, extends), eslint; docs and demo filtered out",
        edits={
            "source": "packages/shared/src/helpers.ts",
            "test": "packages/core/src/Controller.test.ts",
            "config": "packages/shared/tsup.config.ts",
            "root_config": "tsup.config.base.ts",
        },
        bump=Bump("packages/eslint-config", "eslint-plugin-react", "7.37.0"),
        filter=("./packages/*", "./targets/*"),
        patches={
            # vx refuses the root build definition's `../../tsup.config.base.ts` for demo/ (one
            # level deep: it leaves the workspace), even with demo filtered out; turbo matches
            # nothing there. demo has no build script: its own definition changes no task.
            "demo/turbo.json": '{"extends": ["//"], "tasks": {"build": {"inputs": ["src/**"]}}}\n',
        },
        notes="a demo/turbo.json written into both copies: vx refuses the run without it "
        "(see the defects in docs/benchmarks.md § Corpus)",
    ),
    Repo(
        "shuding/nextra",
        "a54da393f4b7cb413bf7f874c1b3847e23bc874d",
        "pnpm@9.15.9",
        ("build", "types:check", "test"),
        "turbo.jsonc (comments), pnpm patches in globalDependencies, tsup builds with "
        "NODE_ENV=production in the script, vitest --typecheck, a task name with a colon; "
        "docs and examples (next) filtered out",
        edits={
            "source": "packages/nextra/src/server/index.ts",
            "test": "packages/nextra-theme-docs/src/__tests__/git-url-parse.test.ts",
            "config": "packages/nextra/tsup.config.ts",
            "root_config": "prettier.config.mjs",
        },
        bump=Bump("packages/nextra-theme-blog", "zx", "8.4.0"),
        # three of the four `test` scripts are `vitest` without `run`: vitest 3 watches unless
        # CI is set, whatever stdin is, so `test` never ends under either tool (its CI sets CI)
        matrix_tasks=("build", "types:check"),
        filter=("./packages/*",),
        node="22.21.0",
        notes="`test` runs `vitest` without `run` in three packages, which watches (never exits) "
        "unless CI is set: not timed, and left out of the matrix",
    ),
    Repo(
        "t3-oss/create-t3-turbo",
        "e69b5858fc4259fbd44af96eaf774a90dee0adcd",
        "pnpm@10.19.0",
        ("build", "typecheck", "lint"),
        "package turbo.json files extending the root, outputs that are tool caches "
        "(`.cache/tsbuildinfo.json`, `.cache/.eslintcache`), `topo`, interactive and persistent "
        "tasks, globalEnv and globalPassThroughEnv, next / vite (tanstack-start) / expo apps",
        edits={
            "source": "packages/validators/src/index.ts",
            "config": "packages/validators/tsconfig.json",
            "root_config": "tooling/typescript/base.json",
        },
        bump=Bump("packages/validators", "zod", "4.1.11"),
        env="AUTH_SECRET",
        node="22.21.0",
        filter=("./packages/*",),
    ),
    Repo(
        "resend/react-email",
        "ffe605819782b31d7f946e30f938b1b63e6b239c",
        "pnpm@11.0.0",
        ("build", "typecheck", "lint"),
        "pnpm 11, `^postbuild` edges to an uncached postbuild, root tasks (`//#format`), "
        "globalEnv and a per-package env list, `pkg#task` definitions, next builds, tsdown",
        edits={
            "source": "packages/render/src/shared/utils/pretty.ts",
            "config": "packages/render/tsconfig.json",
            "root_config": "biome.json",
        },
        env="SUPABASE_URL",
        filter=("./packages/*",),
        node="22.21.0",
        skip="does not install from the npm registry here: @tsdown/css@0.21.9, in its lockfile, "
        "is a 404 (ERR_PNPM_FETCH_404)",
    ),
    Repo(
        "hey-api/openapi-ts",
        "03f9c540272e822bc2afa971d050397929460c98",
        "pnpm@11.8.0",
        ("build", "typecheck"),
        "codegen (the openapi-ts tests' clients generated from specs), 19 package turbo.json "
        "files extending the root (one emptying `dependsOn`), root tasks (`//#test`), explicit "
        "inputs with negations and `*.config.*`, tsdown builds, tsgo (native TypeScript) typecheck",
        edits={
            "source": "packages/shared/src/index.ts",
            "config": "packages/shared/tsdown.config.ts",
            "root_config": "tsconfig.base.json",
        },
        filter=("./packages/*",),
        node="22.21.0",
        skip="does not install from the npm registry here: @tsdown/exe@0.22.3, in its lockfile, "
        "is a 404 (ERR_PNPM_FETCH_404)",
    ),
    Repo(
        "trpc/trpc",
        "340811ba5320637fbaf48fccf3dbfdd258bd34db",
        "pnpm@10.33.1",
        ("build", "typecheck", "lint"),
        "an uncached `prebuild` every build depends on, `pkg#task` outputs, eslint --cache writing "
        ".eslintcache beside the sources, scripts/** and root tsconfigs in globalDependencies, "
        "globalEnv, tsdown builds; www and examples filtered out",
        edits={
            "source": "packages/server/src/index.ts",
            "config": "packages/server/tsdown.config.ts",
            "root_config": "tsconfig.build.json",
        },
        env="DATABASE_URL",
        filter=("./packages/*",),
        install=("pnpm", "install", "--frozen-lockfile", "--ignore-scripts"),
        # no workaround: its build regenerates each package's package.json and turbo.json (the
        # `"outputs": ["package.json", …]` vx once refused), so any patch to them is undone by
        # the first build and moves every later key
        notes="installed with --ignore-scripts: examples' postinstall runs `prisma generate`, which "
        "downloads engines from binaries.prisma.sh",
    ),
    Repo(
        "pingdotgg/uploadthing",
        "e8ffeaeed0dad695bc4e56f2b9f6849da1b53d45",
        "pnpm@10.10.0",
        ("build", "typecheck", "test"),
        "`topo` no-op tasks every task depends on, globalEnv and globalPassThroughEnv, "
        "`**/.env.*local` globalDependencies, a test output (`coverage.json`), tsdown / tsup / vite "
        "+ svelte-package builds, vitest; docs, examples and the nuxt module (its build runs bun) "
        "filtered out",
        edits={
            "source": "packages/shared/src/utils.ts",
            "test": "packages/shared/test/component-utils.test.ts",
            "config": "packages/shared/tsconfig.json",
            "root_config": "prettier.config.js",
        },
        env="UPLOADTHING_TOKEN",
        filter=("./packages/*", "!@uploadthing/nuxt"),
        node="22.21.0",
        skip="does not install from the npm registry here: @next/mdx@15.5.8, in its lockfile, "
        "is a 404 (ERR_PNPM_FETCH_404)",
    ),
]
