// Prints, as JSON, Nx's hash and hash details (every node it folds, with its hash) of each task
// `nx run-many -t <targets>` would run. Nx 18 and newer; run from the workspace root, NX_DAEMON=false.
// `hashedTasks` is what bench/nx_hash_files.js builds on.
const root = process.cwd();
const nx = (p) => require(root + '/node_modules/nx/src/' + p);

// The project graph, nx.json and every task of `nx run-many -t <targets>`, each hashed by Nx.
async function hashedTasks(targets) {
  const { createProjectGraphAsync } = nx('project-graph/project-graph');
  const { readNxJson } = nx('config/nx-json');
  const { createTaskGraph } = nx('tasks-runner/create-task-graph');
  const { createTaskHasher } = nx('hasher/create-task-hasher');
  const { hashTask } = nx('hasher/hash-task');
  const graph = await createProjectGraphAsync({ exitOnError: true });
  const nxJson = readNxJson();
  const deps = {};
  for (const [k, v] of Object.entries(nxJson.targetDefaults ?? {})) if (v.dependsOn) deps[k] = v.dependsOn;
  const projects = Object.keys(graph.nodes).filter((p) => targets.some((t) => graph.nodes[p].data.targets?.[t]));
  const taskGraph = createTaskGraph(graph, deps, projects, targets, undefined, {}, false);
  const hasher = createTaskHasher(graph, nxJson, {});
  const tasks = Object.values(taskGraph.tasks);
  for (const task of tasks) await hashTask(hasher, graph, taskGraph, task, process.env);
  return { graph, nxJson, tasks };
}

module.exports = { root, nx, hashedTasks };

if (require.main === module) {
  (async () => {
    const out = {};
    for (const task of (await hashedTasks(process.argv.slice(2))).tasks) {
      out[task.id] = { hash: task.hash, details: task.hashDetails };
    }
    process.stdout.write(JSON.stringify(out));
  })().catch((e) => { console.error(e); process.exit(1); });
}
