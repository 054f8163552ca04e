// Prints Nx's hash plan for the targets named on the command line, as JSON: for each task id the
// entries its hash folds ("file:libs/a/src/index.ts", "env:NAME", "a:ProjectConfiguration", …).
// Run from the workspace root, with the workspace's own node_modules/nx.
const root = process.cwd();
const { createProjectGraphAsync } = require(root + '/node_modules/nx/src/project-graph/project-graph');
const { HashPlanInspector } = require(root + '/node_modules/nx/src/hasher/hash-plan-inspector');
(async () => {
  const graph = await createProjectGraphAsync({ exitOnError: true });
  const targets = process.argv.slice(2);
  const projects = Object.keys(graph.nodes).filter(p => targets.some(t => graph.nodes[p].data.targets?.[t]));
  const inspector = new HashPlanInspector(graph);
  await inspector.init();
  process.stdout.write(JSON.stringify(inspector.inspectHashPlan(projects, targets)));
})().catch(e => { console.error(e); process.exit(1); });
