// Prints, for an Nx without HashPlanInspector (17–20), what nx_hash_plan.js prints for Nx 21: for
// each task `nx run-many -t <targets>` would run, the entries its hash folds, each file-set node
// of Nx's own hash details (bench/nx_hash_details.js) expanded to "file:…" entries as Nx's hasher
// expands it (nx/src/hasher/node-task-hasher-impl.js: a project file set through
// filterUsingGlobPatterns over the project's file map, a `{workspaceRoot}/` one as the exact file
// or a minimatch over every workspace file); the other nodes (`npm:…`, `p:ProjectConfiguration`,
// `p:TsConfig`, env, runtime) as they are. Run from the workspace root, NX_DAEMON=false.
const root = process.cwd();
const nx = (p) => require(root + '/node_modules/nx/src/' + p);
const { createProjectGraphAsync } = nx('project-graph/project-graph');
const { readNxJson } = nx('config/nx-json');
const { createTaskGraph } = nx('tasks-runner/create-task-graph');
const { createTaskHasher } = nx('hasher/create-task-hasher');
const { hashTask } = nx('hasher/hash-task');
const { filterUsingGlobPatterns } = nx('hasher/task-hasher');
const { createFileMapUsingProjectGraph } = nx('project-graph/file-map-utils');
const { getAllFileDataInContext } = nx('utils/workspace-context');
const { minimatch } = require(require.resolve('minimatch', { paths: [root + '/node_modules/nx'] })); // Nx's own

(async () => {
  const graph = await createProjectGraphAsync({ exitOnError: true });
  const nxJson = readNxJson();
  const { fileMap } = await createFileMapUsingProjectGraph(graph);
  const all = getAllFileDataInContext(root).map((f) => f.file);
  const targets = process.argv.slice(2);
  const deps = {};
  for (const [k, v] of Object.entries(nxJson.targetDefaults ?? {})) if (v.dependsOn) deps[k] = v.dependsOn;
  const projects = Object.keys(graph.nodes).filter((p) => targets.some((t) => graph.nodes[p].data.targets?.[t]));
  const taskGraph = createTaskGraph(graph, deps, projects, targets, undefined, {}, false);
  const hasher = createTaskHasher(graph, nxJson, {});
  const files = (node) => {
    if (node.startsWith('{workspaceRoot}/')) {
      const rel = node.substring(16);
      return all.includes(rel) ? [rel] : all.filter((f) => minimatch(f, rel));
    }
    const at = node.indexOf(':');
    const project = node.substring(0, at);
    const rest = node.substring(at + 1);
    if (!graph.nodes[project] || !/^!?\{projectRoot\}/.test(rest)) return null; // not a file set
    const patterns = rest.split(/,(?=!?\{projectRoot\})/);
    const own = fileMap.projectFileMap[project] ?? [];
    return filterUsingGlobPatterns(graph.nodes[project].data.root, own, patterns).map((f) => f.file);
  };
  const out = {};
  for (const task of Object.values(taskGraph.tasks)) {
    await hashTask(hasher, graph, taskGraph, task, process.env);
    const entries = new Set();
    for (const node of Object.keys(task.hashDetails.nodes)) {
      const found = files(node);
      if (found === null) entries.add(node);
      else for (const f of found) entries.add('file:' + f);
    }
    out[task.id] = [...entries].sort();
  }
  process.stdout.write(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
