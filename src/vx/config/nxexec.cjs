// Runs one Nx executor target the way Nx's own task runner does (nx/bin/run-executor.js and
// run.js's runExecutorInternal), with the workspace's installed `nx`, for vx (vx.config.nx).
//
// argv:  <context.json> <project> <target> <configuration or ""> [forwarded args…]
//        run from the workspace root.
// context.json (written by vx, workspace-relative; when it is missing, Nx computes its own graph):
//        {"projects": {name: project as `nx show project NAME --json` prints it},
//         "dependencies": {name: [workspace project names it depends on]}}
// exit:  0 when the executor's last result says success (Nx's iteratorToProcessStatusCode), 1 when
//        it fails or throws, 2 when the executor cannot be resolved.
//
// Nx's own functions do the work: parseExecutor and getExecutorInformation resolve the executor
// (an npm package's executors.json, a local plugin through tsconfig paths or a workspace package),
// createOverrides parses the forwarded args as `nx run P:T --name=value` does, and
// combineOptionsForExecutor merges options ← configuration ← overrides, then the schema's
// defaults, aliases and validation. The ExecutorContext is the one Nx builds.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const [contextFile, project, target, configArg, ...forwarded] = process.argv.slice(2);
const root = process.cwd();

function fail(code, text) {
  process.stderr.write(`vx: ${text}\n`);
  process.exit(code);
}

let nxDir;
try {
  nxDir = path.dirname(require.resolve('nx/package.json', { paths: [root] }));
} catch {
  fail(2, `\`${project}:${target}\` runs an Nx executor, and the workspace's \`nx\` is not installed (npm i -D nx)`);
}
const nx = (rel) => require(path.join(nxDir, rel));

process.env.NX_WORKSPACE_ROOT ??= root;
process.env.NX_CLI_SET = 'true';
process.env.NX_TASK_TARGET_PROJECT = project;
process.env.NX_TASK_TARGET_TARGET = target;

function readContext() {
  try {
    return JSON.parse(fs.readFileSync(path.join(root, contextFile), 'utf8'));
  } catch {
    return null;
  }
}

// vx's projects as Nx's project graph: each target normalized as Nx normalizes it (tokens in
// options resolved), the workspace dependencies as static edges.
function fromContext(context) {
  const { resolveNxTokensInOptions } = nx('src/project-graph/utils/project-configuration-utils');
  const projects = {};
  const nodes = {};
  const dependencies = {};
  for (const [name, raw] of Object.entries(context.projects)) {
    const config = { ...raw, name, targets: {} };
    for (const [t, body] of Object.entries(raw.targets || {})) {
      const configurations = {};
      for (const [c, opts] of Object.entries(body.configurations || {})) {
        configurations[c] = resolveNxTokensInOptions(opts, config, `${config.root}:${t}:${c}`);
      }
      config.targets[t] = {
        ...body,
        options: resolveNxTokensInOptions(body.options || {}, config, `${config.root}:${t}`),
        configurations,
      };
    }
    projects[name] = config;
    const type = config.projectType === 'application' ? 'app' : 'lib';
    nodes[name] = { name, type, data: config };
    dependencies[name] = (context.dependencies[name] || []).map((d) => ({
      source: name,
      target: d,
      type: 'static',
    }));
  }
  return { projects, graph: { nodes, dependencies, externalNodes: {} } };
}

async function fromNx() {
  const { createProjectGraphAsync, readProjectsConfigurationFromProjectGraph } = nx(
    'src/project-graph/project-graph',
  );
  const graph = await createProjectGraphAsync({ exitOnError: true });
  return { projects: readProjectsConfigurationFromProjectGraph(graph).projects, graph };
}

async function main() {
  const context = readContext();
  const { projects, graph } = context ? fromContext(context) : await fromNx();
  const { readNxJson } = nx('src/config/configuration');
  const executorUtils = nx('src/command-line/run/executor-utils');
  const { getExecutorInformation } = executorUtils;
  // Nx 20 added parseExecutor; older run.js splits the name itself (parseExecutorAndTarget)
  const parseExecutor = executorUtils.parseExecutor || ((name) => name.split(':'));
  const { combineOptionsForExecutor } = nx('src/utils/params');
  const { createOverrides } = nx('src/utils/command-line-utils');

  const targetConfig = projects[project] && projects[project].targets[target];
  if (!targetConfig) fail(2, `Cannot find target '${target}' for project '${project}'`);
  const [nodeModule, executor] = parseExecutor(targetConfig.executor);
  let info;
  try {
    info = getExecutorInformation(nodeModule, executor, root, projects);
  } catch (e) {
    fail(2, `\`${project}:${target}\` runs the executor \`${targetConfig.executor}\`: ${e.message}`);
  }
  const configuration = configArg || targetConfig.defaultConfiguration;
  if (configuration) process.env.NX_TASK_TARGET_CONFIGURATION = configuration;
  const isVerbose = process.env.NX_VERBOSE_LOGGING === 'true';
  const overrides = createOverrides(forwarded);
  const options = combineOptionsForExecutor(
    overrides,
    configuration,
    targetConfig,
    info.schema,
    project,
    path.relative(root, process.cwd()),
    isVerbose,
  );
  if (!info.isNxExecutor) {
    // An Angular builder (a package's `builders`): Nx schedules it through its Angular CLI
    // adapter with the same merged options (run.js's runExecutorInternal), and so does this.
    require(path.join(nxDir, 'src/adapter/compat'));
    const { scheduleTarget } = nx('src/adapter/ngcli-adapter');
    const { eachValueFrom } = nx('src/adapter/rxjs-for-await');
    const observable = await scheduleTarget(
      root,
      { project, target, configuration, runOptions: options, projects },
      isVerbose,
    );
    let last = { success: false };
    for await (const value of eachValueFrom(observable)) last = value;
    return last && last.success ? 0 : 1;
  }
  const result = info.implementationFactory()(options, {
    root,
    target: targetConfig,
    projectsConfigurations: { version: 2, projects },
    nxJsonConfiguration: readNxJson(root),
    projectName: project,
    targetName: target,
    configurationName: configuration,
    projectGraph: graph,
    taskGraph: undefined,
    cwd: process.cwd(),
    isVerbose,
  });
  let last = { success: false };
  if (result && typeof result.then === 'function') {
    last = await result;
  } else if (result && typeof result[Symbol.asyncIterator] === 'function') {
    for await (const value of result) last = value;
  } else {
    throw new TypeError(
      `NX Executor "${targetConfig.executor}" should return either a Promise or an AsyncIterator`,
    );
  }
  return last && last.success ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(e && e.message ? e.message : e);
    process.exit(1);
  },
);
