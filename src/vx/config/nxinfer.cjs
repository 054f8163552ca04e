// Resolves an Nx workspace's projects the way Nx does, with the workspace's own `nx` and the
// plugins nx.json declares, for vx (vx.config.nxinference).
//
// stdin:  {"root": "/abs/workspace", "answer": "/tmp/…/answer.json", "graphOnly": bool}
//         (graphOnly: nx.json declares no `plugins`; only the graph's edges are answered)
// answer: {"nx": version, "projects": {root: project as `nx show project --json` prints it},
//          "sources": {root: {field path: [file, plugin]}},
//          "dependencies": {name: [[name, "static"|"dynamic"|"implicit"]]} from Nx's project graph,
//          "patterns": [each plugin's createNodes glob],
//          "globs": [[patterns, exclude]] the plugins asked Nx's file index for,
//          "reads": [every path read or probed]}
//     or:  {"errors": [{"plugin", "file", "message"}]}
//
// Nx's own functions do the work: getPlugins loads every `plugins` entry (in process: no plugin
// workers), retrieveProjectConfigurations runs each one's createNodes over the files its glob
// matches and merges the results with project.json, package.json and targetDefaults in Nx's order,
// normalizeImplicitDependencies expands `implicitDependencies` as the project graph does. What the
// plugins read through `fs`, and what they ask Nx's file index, is reported so vx keeps the answer
// until one of those changes.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const reads = new Set();
function note(p) {
  if (typeof p === 'string') reads.add(path.resolve(p));
  else if (p instanceof URL) reads.add(p.pathname);
  else if (Buffer.isBuffer(p)) reads.add(path.resolve(p.toString()));
}
function watch(target, names) {
  for (const name of names) {
    const real = target[name];
    if (typeof real !== 'function') continue;
    target[name] = function (p, ...rest) {
      note(p);
      return real.call(this, p, ...rest);
    };
  }
}

function readInput() {
  return JSON.parse(fs.readFileSync(0, 'utf8'));
}

function message(error) {
  if (!error) return 'unknown error';
  const text = error.stack || error.message || String(error);
  // Nx's own message, without the stack frames under it
  return String(error.message || text).trim();
}

// Each failure as {plugin, file, message}: Nx's AggregateCreateNodesError carries the nx.json
// index of its plugin and [file, error] pairs; a MergeNodesError its file and plugin.
function failures(error, nxJson) {
  const named = (index) => {
    const entry = ((nxJson && nxJson.plugins) || [])[index];
    return typeof entry === 'string' ? entry : entry && entry.plugin;
  };
  const out = [];
  const nested = Array.isArray(error && error.errors) ? error.errors : null;
  if (!nested) {
    out.push({ plugin: error && error.pluginName ? error.pluginName : '', file: error && error.file ? error.file : '', message: message(error) });
    return out;
  }
  for (const e of nested) {
    if (Array.isArray(e && e.errors)) {
      for (const entry of e.errors) {
        const [file, inner] = Array.isArray(entry) ? entry : [null, entry];
        const plugin = e.pluginName || (typeof e.pluginIndex === 'number' ? named(e.pluginIndex) : '');
        out.push({ plugin: plugin || '', index: e.pluginIndex, file: file || '', message: message(inner) });
      }
    } else {
      out.push({
        plugin: (e && e.pluginName) || '',
        file: (e && e.file) || '',
        message: message(e && e.error ? e.error : e),
      });
    }
  }
  return out;
}

function versionOf(nxDir) {
  return JSON.parse(fs.readFileSync(path.join(nxDir, 'package.json'), 'utf8')).version;
}

// Nx's project graph: the edges its plugins' createDependencies add (the built-in JS analysis of
// source imports, as nx.json's pluginsConfig["@nx/js"] and the root's dependencies turn it on,
// @nx/js's tsconfig paths), by project name, other workspace projects only (no `npm:` node).
// Writes .nx/workspace-data/project-graph.json as Nx does.
async function edges(nx) {
  const { createProjectGraphAsync } = nx('src/project-graph/project-graph.js');
  const graph = await createProjectGraphAsync({ exitOnError: false });
  const dependencies = {};
  for (const [source, list] of Object.entries(graph.dependencies || {})) {
    if (!graph.nodes[source]) continue;
    const targets = [];
    for (const edge of list || []) {
      if (edge.target !== source && graph.nodes[edge.target]) targets.push([edge.target, edge.type]);
    }
    if (targets.length) dependencies[source] = targets;
  }
  return dependencies;
}

async function main() {
  const request = readInput();
  const root = request.root;
  const answer = (data) => fs.writeFileSync(request.answer, JSON.stringify(data));
  process.chdir(root);
  process.env.NX_WORKSPACE_ROOT_PATH = root;
  process.env.NX_DAEMON = 'false';
  process.env.NX_ISOLATE_PLUGINS = 'false';
  process.env.NX_NO_CLOUD = 'true';
  process.env.NX_TUI = 'false';
  let nxDir;
  try {
    nxDir = path.dirname(require.resolve('nx/package.json', { paths: [root] }));
  } catch {
    answer({ missing: 'nx' });
    return;
  }
  const nx = (rel) => require(path.join(nxDir, rel));
  watch(fs, ['readFileSync', 'existsSync', 'statSync', 'lstatSync', 'readdirSync', 'accessSync', 'readFile', 'stat', 'lstat', 'readdir', 'access']);
  watch(fs.promises, ['readFile', 'stat', 'lstat', 'readdir', 'access']);
  const context = nx('src/utils/workspace-context.js');
  const globs = [];
  for (const name of ['globWithWorkspaceContext', 'globWithWorkspaceContextSync']) {
    const real = context[name];
    if (typeof real !== 'function') continue;
    context[name] = function (workspaceRoot, patterns, exclude) {
      globs.push([patterns, exclude || []]);
      return real.apply(this, arguments);
    };
  }
  if (request.graphOnly) {
    // no `plugins`: the projects are read as vx reads them; only the graph's edges are asked
    let dependencies;
    try {
      dependencies = await edges(nx);
    } catch (error) {
      answer({ errors: [{ plugin: '', file: '', message: message(error) }] });
      return;
    }
    answer({ nx: versionOf(nxDir), projects: {}, sources: {}, dependencies, patterns: [], globs, reads: [...reads] });
    return;
  }
  const { readNxJson } = nx('src/config/nx-json.js');
  const { normalizeImplicitDependencies } = nx('src/project-graph/utils/normalize-project-nodes.js');
  const version = versionOf(nxDir);
  const nxJson = readNxJson(root);
  const has = (rel) => fs.existsSync(path.join(nxDir, rel));
  const loaded = has('src/project-graph/plugins/get-plugins.js')
    ? await currentPlugins(nx, root, nxJson)
    : has('src/project-graph/plugins/internal-api.js')
      ? await middlePlugins(nx, root, nxJson)
      : await earlyPlugins(nx, context, root, nxJson);
  if (loaded.errors) {
    answer({ errors: loaded.errors });
    return;
  }
  const { result, patterns, cleanup } = loaded;
  const byName = {};
  for (const project of Object.values(result.projects)) {
    byName[project.name] = { name: project.name, type: project.projectType === 'library' ? 'lib' : 'app', data: project };
  }
  const projects = {};
  for (const [projectRoot, project] of Object.entries(result.projects)) {
    project.implicitDependencies = normalizeImplicitDependencies(project.name, project.implicitDependencies, byName);
    project.targets ??= {};
    project.tags ??= [];
    projects[projectRoot === '.' ? '' : projectRoot] = project;
  }
  const sources = {};
  for (const [projectRoot, map] of Object.entries(result.sourceMaps || {})) {
    sources[projectRoot === '.' ? '' : projectRoot] = map;
  }
  let dependencies;
  try {
    dependencies = await edges(nx);
  } catch (error) {
    answer({ errors: failures(error, nxJson) });
    return;
  }
  answer({
    nx: version,
    projects,
    sources,
    dependencies,
    patterns,
    globs,
    reads: [...reads],
  });
  try {
    cleanup();
  } catch {}
}

// Nx 20 and newer: getPlugins loads nx.json's plugins and Nx's own (project.json, package.json).
async function currentPlugins(nx, root, nxJson) {
  const { getPlugins, cleanupPlugins } = nx('src/project-graph/plugins/get-plugins.js');
  const { retrieveProjectConfigurations, getGlobPatternsOfPlugins } = nx(
    'src/project-graph/utils/retrieve-workspace-files.js'
  );
  let plugins;
  try {
    plugins = await getPlugins(root);
  } catch (error) {
    return { errors: failures(error, nxJson) };
  }
  try {
    const result = await retrieveProjectConfigurations(plugins, root, nxJson);
    const patterns = getGlobPatternsOfPlugins(plugins.filter((p) => !!p.createNodes));
    return { result, patterns, cleanup: cleanupPlugins };
  } catch (error) {
    return { errors: failures(error, nxJson) };
  }
}

// Nx 18.3 to 19: loadNxPlugins (plugins/internal-api.js) answers [plugins, cleanup], Nx's own
// plugins included; retrieveProjectConfigurations takes them as later versions' does, and the
// glob list was named configurationGlobs before Nx 20's getGlobPatternsOfPlugins.
async function middlePlugins(nx, root, nxJson) {
  const { loadNxPlugins } = nx('src/project-graph/plugins/internal-api.js');
  const retrieval = nx('src/project-graph/utils/retrieve-workspace-files.js');
  const globsOf = retrieval.getGlobPatternsOfPlugins || retrieval.configurationGlobs;
  let plugins;
  let cleanup = () => {};
  try {
    [plugins, cleanup] = await loadNxPlugins((nxJson && nxJson.plugins) || [], root);
  } catch (error) {
    return { errors: failures(error, nxJson) };
  }
  try {
    const result = await retrieval.retrieveProjectConfigurations(plugins, root, nxJson);
    const patterns = globsOf(plugins.filter((p) => !!p.createNodes));
    // Nx 18.3 normalizes the targets only as the project graph's nodes (Nx 19's merge
    // does it with normalizeTarget): `configurations: {}` and the tokens resolved, as
    // `nx show project` prints them
    const { normalizeTarget } = nx('src/project-graph/utils/project-configuration-utils.js');
    if (typeof normalizeTarget !== 'function') {
      const { normalizeProjectTargets } = nx('src/project-graph/utils/normalize-project-nodes.js');
      for (const p of Object.values(result.projects)) p.targets = normalizeProjectTargets(p, p.name);
    }
    return { result, patterns, cleanup };
  } catch (error) {
    cleanup();
    return { errors: failures(error, nxJson) };
  }
}

// Nx 17 to 18.2: loadNxPlugins (src/utils/nx-plugin.js) gives {plugin, options} pairs, Nx's own
// plugins last, and retrieveProjectConfigurations loads them itself; its steps are taken one by
// one here so that the globs go through the watched file index as Nx's own call does.
async function earlyPlugins(nx, context, root, nxJson) {
  const { loadNxPlugins } = nx('src/utils/nx-plugin.js');
  const { getNxRequirePaths } = nx('src/utils/installation-directory.js');
  const retrieval = nx('src/project-graph/utils/retrieve-workspace-files.js');
  const { configurationGlobs } = retrieval;
  // 18.2 moved it beside the merge it runs
  const createProjectConfigurations =
    retrieval.createProjectConfigurations ||
    nx('src/project-graph/utils/project-configuration-utils.js').createProjectConfigurations;
  let plugins;
  try {
    plugins = await loadNxPlugins(nxJson.plugins ?? [], getNxRequirePaths(root), root);
  } catch (error) {
    return { errors: failures(error, nxJson) };
  }
  try {
    const patterns = configurationGlobs(plugins);
    const files = await context.globWithWorkspaceContext(root, patterns);
    const result = await createProjectConfigurations(root, nxJson, files, plugins);
    // keyed by project name in these versions, by root from 19 on; the targets normalized as
    // the project graph's nodes are (normalizeProjectNodes: tokens resolved, `configurations: {}`),
    // which `nx show project` prints and later versions' retrieveProjectConfigurations returns
    const { normalizeProjectTargets } = nx('src/project-graph/utils/normalize-project-nodes.js');
    result.projects = Object.fromEntries(
      Object.entries(result.projects).map(([name, p]) => {
        p.targets = normalizeProjectTargets(p, name);
        return [p.root, p];
      })
    );
    return { result, patterns, cleanup: () => {} };
  } catch (error) {
    return { errors: failures(error, nxJson) };
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    process.stderr.write(`vx: resolving the Nx projects failed: ${error && error.stack ? error.stack : error}\n`);
    process.exit(3);
  }
);
