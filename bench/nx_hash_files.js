// Prints, for an Nx without HashPlanInspector (17–20), what nx_hash_plan.js prints for Nx 21: for
// each task `nx run-many -t <targets>` would run, the entries its hash folds, each file-set node
// of Nx's own hash details (bench/nx_hash_details.js) expanded to "file:…" entries; the other
// nodes (`npm:…`, `p:ProjectConfiguration`, `p:TsConfig`, env, runtime) as they are. A project
// file set is matched against the project's file map, a `{workspaceRoot}/` one against every
// workspace file (the exact file, else the glob), as Nx's hasher does — with dotfiles matched
// as its native hasher (the default) matches them: Nx 18.0.5's moves a root project's
// `{projectRoot}/**/*` node for an edit to its `.prettierrc` or `src/assets/.gitkeep`, where
// the JS `filterUsingGlobPatterns` (its non-native hasher) leaves them out. Run from the
// workspace root, NX_DAEMON=false.
const { root, nx, hashedTasks } = require('./nx_hash_details');
const { createFileMapUsingProjectGraph } = nx('project-graph/file-map-utils');
const { getAllFileDataInContext } = nx('utils/workspace-context');
const { minimatch } = require(require.resolve('minimatch', { paths: [root + '/node_modules/nx'] })); // Nx's own

(async () => {
  const { graph, tasks } = await hashedTasks(process.argv.slice(2));
  const { fileMap } = await createFileMapUsingProjectGraph(graph);
  const all = (await getAllFileDataInContext(root)).map((f) => f.file); // async since Nx 20
  const files = (node) => {
    if (node.startsWith('workspace:[') && node.endsWith(']')) {
      // Nx 21 groups a task's workspace file sets into one node
      return node.slice(11, -1).split(/,(?=\{workspaceRoot\}\/)/).flatMap((f) => files(f) ?? []);
    }
    if (node.startsWith('{workspaceRoot}/')) {
      const rel = node.substring(16);
      return all.includes(rel) ? [rel] : all.filter((f) => minimatch(f, rel, { dot: true }));
    }
    const at = node.indexOf(':');
    const project = node.substring(0, at);
    const rest = node.substring(at + 1);
    if (!graph.nodes[project] || !/^!?\{projectRoot\}/.test(rest)) return null; // not a file set
    const patterns = rest.split(/,(?=!?\{projectRoot\})/);
    const projectRoot = graph.nodes[project].data.root;
    const globs = patterns.map((p) => p.replace('{projectRoot}', projectRoot).replace(/^(!?)\.\//, '$1'));
    const positive = globs.filter((g) => !g.startsWith('!'));
    const negative = globs.filter((g) => g.startsWith('!')).map((g) => g.substring(1));
    const match = (f, g) => minimatch(f, g, { dot: true });
    return (fileMap.projectFileMap[project] ?? [])
      .map((f) => f.file)
      .filter((f) => (positive.length === 0 || positive.some((g) => match(f, g))) && !negative.some((g) => match(f, g)));
  };
  const out = {};
  for (const task of tasks) {
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
