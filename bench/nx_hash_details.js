// Prints, as JSON, Nx's hash and hash details (every node it folds, with its hash) of each task
// `nx run-many -t <targets>` would run. Nx 18 and newer; run from the workspace root, NX_DAEMON=false.
const root = process.cwd();
const nx = (p) => require(root + '/node_modules/nx/src/' + p);
const { createProjectGraphAsync } = nx('project-graph/project-graph');
const { readNxJson } = nx('config/nx-json');
const { createTaskGraph } = nx('tasks-runner/create-task-graph');
const { createTaskHasher } = nx('hasher/create-task-hasher');
const { hashTask } = nx('hasher/hash-task');
(async () => {
  const graph = await createProjectGraphAsync({ exitOnError: true });
  const nxJson = readNxJson();
  const targets = process.argv.slice(2);
  const deps = {};
  for (const [k, v] of Object.entries(nxJson.targetDefaults ?? {})) if (v.dependsOn) deps[k] = v.dependsOn;
  const projects = Object.keys(graph.nodes).filter((p) => targets.some((t) => graph.nodes[p].data.targets?.[t]));
  const taskGraph = createTaskGraph(graph, deps, projects, targets, undefined, {}, false);
  const hasher = createTaskHasher(graph, nxJson, {});
  const out = {};
  for (const task of Object.values(taskGraph.tasks)) {
    await hashTask(hasher, graph, taskGraph, task, process.env);
    out[task.id] = { hash: task.hash, details: task.hashDetails };
  }
  process.stdout.write(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
