"""The help texts: `vx help`, and each verb's (`vx help VERB`, `vx VERB --help`). The verb table
(`vx.cli.main.VERBS`) hands each verb its text; `vx help run` is the list of every run flag.
"""

HELP = """vx — a fast, correct task runner and build cache for JavaScript monorepos

usage: vx <verb> [options]

verbs:
  run [OPTIONS] [TASK | PKG#TASK …] [-- ARGS]   run tasks and what they depend on
  run-many -t TASK … [-p P,…] [--exclude P,…]  Nx's spelling of `vx run TASK … --all`
  affected -t TASK … [--base REF]             Nx's spelling of `vx run TASK … --affected=REF`
  watch [OPTIONS] TASK …                      run, then run again on every change that matters
  init [--dry] [--force]                      a vx.config.json per package, from its scripts
  migrate [--from turbo|nx] [--dry] [--force] vx configs written from turbo.json or Nx's targets
  info                                        what vx sees here: versions, workspace, cache, sandbox
  show [PROJECT | PROJECT#TASK | TASK]        the configs as vx resolved them (--format json)
  why PKG#TASK [--run RUNID]                  why the task hit or ran in the last run (its key)
  last [RUNID] [--list[=N]] [--failed]        what the latest run did, and how to re-run what failed
  history [PKG#TASK | TASK …] [--window N]    each task's recorded durations, which order a run
  prune PKG … [--docker] [--out-dir DIR]      a partial workspace for PKG, its lockfile cut to it
  cache prune [--older-than D] [--max-size S] evict old and least recently used cache entries
  cache clean [--dry-run]                     remove every entry of this workspace's cache
  mcp                                         an MCP server on stdin/stdout: tasks, runs, keys for an agent
  completions bash|zsh|fish                   a completion script for the shell
  help [VERB]                                 show help for vx or one verb
  version                                     print the version (also --version)

`vx help run` lists every flag of `vx run`.
"""

RUN_HELP = """usage: vx run [OPTIONS] [TASK | PKG#TASK …] [-- ARGS]

Runs the named tasks (and everything they depend on) in the project that holds the current
directory; from the workspace root, a task the root does not declare runs in every project
that declares it. Arguments after `--` reach the requested tasks only, and are in their keys.

selection:
  --all                     every project that declares the task
  --filter, -F SELECTOR     only these projects (repeatable): name, @scope/*, ./dir, ., //,
                            tag:x, name... (and its dependencies), ...name (and dependents),
                            name^... / ...^name (without itself), [ref] (changed since ref),
                            !name (exclude)
  --affected[=REF]          only tasks a change since REF reaches (its inputs, or its deps');
                            REF defaults to affectedBase, origin/HEAD, main or master, HEAD~1
options:
  --concurrency N|N%        tasks run at once (default: CPUs, cgroup-aware)
  --continue[=MODE]         never | deps-ok (default) | always (bare: always)
  --force                   ignore cache hits, run everything, save the results
  --no-cache                neither read nor write the cache
  --frozen                  the configs written as code as vx-lock.json holds them (no Node
                            for them, no staleness check; `vx lock` writes the lock)
  --cache SPEC              read/write per layer, e.g. local:rw,remote:r (`remote:` = off)
  --cache-dir PATH          the cache directory (default: <root>/.vx/cache)
  --download all|toplevel|none  remotely executed outputs fetched: all (default), only the
                            requested tasks', or none (fetched when a task here needs them)
  --timeout MS              default per-task timeout in milliseconds
  --retry N                 default extra attempts for a failing task
  --dry[=text|json]         print the plan with predicted cache status; run nothing
  --graph[=FILE.dot]        the plan as Graphviz DOT, coloured by predicted status; run nothing
  --output-logs MODE        full | new-only | errors-only | hash-only | none: which task
                            output to show (default: by flow; failures are never silent)
  --summarize[=PATH]        write the run summary JSON (default: <cache>/runs/<id>.json)
  --tag K=V                 label the run (repeatable): kept in its history, the summary and
                            `vx last`; a secret-looking key's value is kept as ***
  --report[=markdown]       a markdown table of the run on stdout (task, status, cache, time)
  --report-file PATH        append that table to PATH, e.g. "$GITHUB_STEP_SUMMARY"
  --format text|json        json: the run's record on stdout (as `vx last --format json`), the
                            rows and frames on stderr; a refusal is {"ok":false,"error":{…}}
  --profile[=FILE]          a Chrome trace of the run (default: profile.json): one span per task
  --verify[=inputs]         run every task traced (no cache reads) and fail on files a
                            cached task read undeclared or wrote outside its outputs
  --verify=determinism      run each cached task again against its entry (twice without
                            one) and fail on outputs that differ, naming the line or byte;
                            --verify=all is inputs and determinism
  --framework-inference B   true (default) | false: whether a turbo.json task keys and passes
                            its framework's variables (NEXT_PUBLIC_*, VITE_*, …), as turbo's flag
  --only                    run the named tasks, not their dependencies (turbo's --only; Nx's
                            --exclude-task-dependencies); they are still keyed: a task whose
                            dependency did not run may hit, but is never saved
  --exclude-dependencies[=T,…]  --only for the dependencies named T only (bare: all of them)
  --ui stream|tui           stream (default): rows and frames; tui: a split view on a terminal,
                            the task list and the selected task's output (j/k, q quits); it
                            closes when the run ends. turbo.json's "ui" is the default
  --keep-ui                 keep the split view open after the run, until q
Nx's spellings (an Nx workspace's `project:target[:configuration]` names work too):
  -t, --targets T,…         the tasks to run         -p, --projects P,…   --filter each
  --exclude P,…             --filter !P for each     -c, --configuration C  run each target's C
  --base REF                --affected=REF           --head HEAD  (vx compares with the working tree)
  --parallel N, --skip-nx-cache: --concurrency, --force

turbo's flags (docs/cli.md has the whole table): --dry-run, --only, --force[=BOOL] and
  --token, --team, --api, --remote-cache-timeout S  the remote cache (TURBO_TOKEN, …; never shown)
  --remote-only[=BOOL]      --cache=local:,remote:rw   --remote-cache-read-only[=BOOL]  no uploads
  --color, --no-color       FORCE_COLOR=1, NO_COLOR=1   --cwd DIR   run as if started in DIR
  --env-mode[=strict]       vx is always strict (loose is refused, with what to declare)
  --log-order auto|grouped  --log-prefix auto|none     what vx does anyway (stream, task refused)
  --no-daemon, --daemon, --skip-infer, --no-update-notifier, --cache-workers N,
  --dangerously-disable-package-manager-check: no effect in vx
  --json, --log-file, --global-deps, --single-package and the rest are refused with the reason

exit: 0 all tasks ok · 1 a task failed, was skipped or aborted · 2 usage or config error
      130 / 143 / 129 interrupted by SIGINT / SIGTERM / SIGHUP (`--format json` changes none)
"""

INFO_HELP = """usage: vx info [--format text|json]

Prints what vx sees from here: its version, git and node, the workspace root, package manager,
projects and tasks (or the config error), the cache dir and its size, workers, and the sandbox.

  --format json   one document: the key and schema versions, the store (where, entries, bytes,
                  orphans), the runs of the last 24 h and the latest few, git's fsmonitor and
                  untrackedCache, whether vx-lock.json is there (docs/cli.md § vx info)
"""

CACHE_HELP = """usage: vx cache prune [--older-than DUR] [--max-size SIZE] [--dry-run] [--format text|json]
                      [--cache-dir PATH]
       vx cache clean [--dry-run] [--format text|json] [--cache-dir PATH]

The cache is not in `.vx/`: its entries and artifacts are in the repository's shared store under
the home (`~/.vx/<id>/cache`, shared by the repository's clones and worktrees; `vx info` names
it), so deleting `.vx` does not clear it. `vx cache clean` removes every entry of the store this
workspace uses (or of the cache dir named by --cache-dir, cacheDir or VX_CACHE_DIR); the run
history (`vx last`) and the key history (`vx why`) stay.

Evicts local cache entries not used for longer than DUR (30d, 12h, 90m, 45s, 2w), then the least
recently used until the cache fits in SIZE (10G, 500MB, 64KB; K/M/G/T are powers of 1024), and
sweeps artifacts and temp files no index row accounts for (an hour old) and rows whose artifact
is gone. Waits for a `vx run` of the same workspace to finish first.

  --dry-run        say what would go; remove nothing (prune and clean)
  --format json    print {dryRun, evicted, bytesFreed, orphans, orphanBytes, phantoms, kept, keptBytes}

(turbo's prune, a partial workspace for one package, is `vx prune PKG`.)
"""

WATCH_HELP = """usage: vx watch [RUN OPTIONS] TASK [PKG#TASK …] [-- ARGS]

Runs the tasks as `vx run` would, then again each time a file a run could read changes (judged
by content: a save that changes nothing is no edit). Never a trigger: outputs, gitignored paths,
node_modules, .git, .vx. A failing cycle or a broken config keeps watching. Ctrl-C stops
(exit 0). VX_WATCH_POLL=1 polls every 250 ms instead of using the OS's file events.
`--dry`, `--graph`, `--summarize`, `--ui`, `--keep-ui`, `--format` and `--cwd` are refused.
"""

INIT_HELP = """usage: vx init [--dry] [--force] [--cache]

Writes a vx.config.json beside each package.json, from its scripts: each script a task running
it (npm's pre/post hooks folded in), `build` after its dependencies' builds, `test` and
`typecheck` after the package's own build, and for each build the cache block to turn on, as a
comment with the output directories its tooling suggests and every file of the package as its
inputs, as turbo hashes them (`--cache`: written on; narrow the inputs only to what a traced
run of `vx run build` shows the build reads). Long-running
scripts (dev, start, serve, watch, preview, a watcher) become persistent tasks. A root script
that runs one script in every member (`npm run build --workspaces`, `turbo run build`) is no
task: in the root package.json it becomes `vx run build`. Existing configs are kept (`--force`
replaces them); `--dry` prints what it would write. In a Turborepo repository vx already runs
turbo.json unchanged, and in an Nx workspace nx.json and project.json, so `vx init` there
needs `--force`.
"""

MIGRATE_HELP = """usage: vx migrate [--from turbo|nx] [--dry] [--force] [--format json|ts]

Writes a vx.config.json (JSON with comments) beside each project that has tasks, holding the
tasks vx runs today from turbo.json, or from nx.json and the project targets: the same tasks,
dependencies, inputs and outputs, so `vx run build --dry=json` plans the same. Whatever has no
vx field is a `TODO(vx-migrate)` comment saying why (a target executor vx cannot run is a task
that fails saying so). vx.workspace.json gets `"migrated": "turbo"` (or "nx"): from then on vx
reads tasks from the vx configs only. `--from` picks the tool where both files exist (default:
turbo.json). `--format ts` writes vx.config.ts files and a vx-preset.ts with the global lists.
An existing vx.config is refused (exit 2) unless `--force`; `--dry` prints the files instead.
"""

WHY_HELP = """usage: vx why PKG#TASK [--run RUNID] [--format=json]

Answers for the task's last run (PKG#TASK, Nx's PKG:TASK, or a task of the project you stand in):
after a hit, that it hit and since when its key is unchanged; otherwise what changed between its
last two keys: files (added, removed, edited), declared env variables, its declaration, its
package.json, the workspace's lockfiles, arguments after `--`, and upstream tasks (each with the
next `vx why` to ask). With no run on record (a fresh clone), what its key is folded from now,
from the plan. A name the workspace does not have is refused with the nearest one.
`--run RUNID` (a run id or its prefix, as `vx last` lists them) compares the key of the task's
latest run with its key in that run instead of its previous one.
"""

LAST_HELP = """usage: vx last [RUNID] [--list[=N]] [--failed] [--log PKG#TASK] [--format text|json]
                [--cache-dir DIR]

Shows the latest recorded run (or the one whose id starts RUNID): its verdict, command, time and
counts, then each task, failures first, with its reason, time, CPU parallelism and peak RSS, and
ends with the command that re-runs what failed. A task whose key has both passed and failed on
record, or that passed on a retry, is marked flaky. `--failed` picks the latest failed run;
`--list[=N]` lists the last N runs (default 10) by their shortest unique id prefixes;
`--log PKG#TASK` prints a failed task's kept log. Reads the run history in the cache only.
"""

HISTORY_HELP = """usage: vx history [PKG#TASK | TASK …] [--window N] [--format text|json] [--cache-dir DIR]

Shows the durations the scheduler expects, from the run history in the cache: for each task that
executed and passed, the number of such runs in the window (the last N, default the workspace's
schedule.window or 20), their median — what orders a run's ready tasks by the longest expected
chain still to run — and the last, fastest and slowest. A bare TASK names it in every project.
Also lists the workspace's schedule.assume entries and its timings file.
"""

SHOW_HELP = """usage: vx show [PROJECT | PROJECT#TASK | TASK] [--format text|json]

Prints the configs as vx resolved them — from vx.config files, configs written as code, or a
Turborepo repository's turbo.json — each task as its key folds it. Without a name: one row per
project with its workspace dependencies, tasks and config file. Nx's `vx show projects` and
`vx show project NAME` work too (in an Nx workspace `vx show project NAME --json` prints the
project as `nx show project NAME --json` does), and `vx ls` is `vx show` (turbo's `ls`).
"""

PRUNE_HELP = """usage: vx prune PKG [PKG …] [--docker] [--out-dir DIR]

Writes a partial workspace for the packages named (turbo's `prune`): them and every workspace
package they depend on, the root's files (package.json, the vx, turbo and package manager
configs), and the lockfile cut to what those packages install — npm, pnpm, yarn (classic and
berry) and bun's text lockfile, each in its own format, so a frozen install accepts it.
Only what git lists is copied (never node_modules or ignored files). The out dir must be new
or empty. (Evicting cache entries is `vx cache prune`.)

  --docker         out/json: the manifests, lockfile and install configs (for the install
                   layer); out/full: the whole pruned workspace; the lockfile also in out/
  --out-dir DIR    where to write, relative to the workspace root (default: out)
  --scope PKG      turbo 1's spelling of a package to keep
"""

LOCK_HELP = """usage: vx lock [--check]

Evaluates every project config written as code (vx.config.ts, .mts, .js, .mjs, .cjs) and writes
vx-lock.json at the workspace root: each config's value and a digest of every file its
evaluation read. Commit it. `vx run` with the frozen flag then takes the configs from it
without starting Node for them. A lock whose values hold a secret variable's value is refused (nothing written).
A plain `vx run` never reads the lock.

  --check          write nothing: exit 1 when a config, a file it reads or what it evaluates
                   to differs from the lock (a CI step), naming each
"""

MCP_HELP = """usage: vx mcp

A Model Context Protocol server on stdin and stdout (JSON-RPC 2.0, one message a line), for an
agent or editor started in the workspace. Its tools: listTasks, getConfig, planTasks, runTasks,
getRunHistory, getFailures, getTaskLog, whyDidThisRerun, explainCacheKey, getCacheStats,
pruneCache, planInit, getWorkspaceInfo. Only protocol messages go to stdout; vx's and the
tasks' output goes to stderr or into a tool's result. Ends when stdin does.
"""

COMPLETIONS_HELP = """usage: vx completions bash|zsh|fish

Prints a completion script for the shell: verbs and every flag each verb's help names.
  bash: eval "$(vx completions bash)"      zsh: source <(vx completions zsh)
  fish: vx completions fish | source
"""

NX_VERB_HELP = """usage: vx run-many -t TASK[,TASK…] [TASK…] [RUN OPTIONS]
       vx affected -t TASK[,TASK…] [--base REF] [RUN OPTIONS]

Nx's verbs: `run-many` is `vx run … --all`, `affected` is `vx run … --affected[=REF]` (REF from
--base, else affectedBase, origin/HEAD, main or master, HEAD~1). `vx help run` lists the options.
"""
