// Nx's hash plan with its file sets expanded to files, for an Nx without HashPlanInspector (18,
// 19, 20): the same JSON as tests/scenarios/support/nx_hash_plan.js prints there (for each task
// id the entries its hash folds, "file:libs/a/src/index.ts", "npm:…", "a:ProjectConfiguration",
// …). The plan is Nx's own (its native HashPlanner); its file sets are matched with Nx's native
// glob (the one its native task hasher, the default since Nx 18, matches them with: unlike the JS
// hasher's minimatch it matches dotfiles), a project's within Nx's own file map of the project.
// Run from the workspace root, NX_DAEMON=false.
const root = process.cwd();
const nx = (p) => require(root + '/node_modules/nx/src/' + p);
const { createProjectGraphAsync } = nx('project-graph/project-graph');
const { readNxJson } = nx('config/nx-json');
const { createTaskGraph } = nx('tasks-runner/create-task-graph');
const { createProjectFileMapUsingProjectGraph } = nx('project-graph/file-map-utils');
const { getAllFileDataInContext, globWithWorkspaceContext } = nx('utils/workspace-context');
const native = nx('native');
const { transformProjectGraphForRust } = nx('native/transform-objects');
(async () => {
  const graph = await createProjectGraphAsync({ exitOnError: true });
  const nxJson = readNxJson();
  const targets = process.argv.slice(2);
  const projects = Object.keys(graph.nodes).filter((p) => targets.some((t) => graph.nodes[p].data.targets?.[t]));
  const taskGraph = createTaskGraph(graph, {}, projects, targets, undefined, {}, false);
  const planner = new native.HashPlanner(nxJson, native.transferProjectGraph(transformProjectGraphForRust(graph)));
  const plans = planner.getPlans(Object.keys(taskGraph.tasks), taskGraph);
  const fileMap = await createProjectFileMapUsingProjectGraph(graph);
  const all = getAllFileDataInContext(root).map((f) => f.file);
  const rootFiles = (pattern) => {
    const rel = pattern.slice('{workspaceRoot}/'.length);
    return all.includes(rel) ? [rel] : globWithWorkspaceContext(root, [rel]);
  };
  const projectFiles = (project, patterns) => {
    const dir = graph.nodes[project].data.root;
    const globs = patterns.map((p) => p.replace('{projectRoot}', dir).replace(/^(!?)\.\//, '$1'));
    const own = new Set((fileMap[project] || []).map((f) => f.file));
    const pos = globs.filter((g) => !g.startsWith('!'));
    const neg = globs.filter((g) => g.startsWith('!')).map((g) => g.slice(1));
    return globWithWorkspaceContext(root, pos, neg).filter((f) => own.has(f));
  };
  const out = {};
  for (const [id, entries] of Object.entries(plans)) {
    const files = new Set();
    const rest = [];
    for (const e of entries) {
      const m = /^([^:{]+):(!?\{projectRoot\}.*)$/.exec(e);
      if (e.startsWith('{workspaceRoot}/')) {
        rootFiles(e).forEach((f) => files.add(f));
      } else if (m && graph.nodes[m[1]]) {
        const patterns = m[2].split(/,(?=!?\{projectRoot\})/);
        projectFiles(m[1], patterns).forEach((f) => files.add(f));
      } else {
        rest.push(e);
      }
    }
    out[id] = [...[...files].sort().map((f) => 'file:' + f), ...rest];
  }
  process.stdout.write(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
