#!/usr/bin/env node
// The example's one script, run in a package: `node ../../scripts/task.js build|test|lint|dev`.
'use strict';
const fs = require('fs');
const { join } = require('path');

const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8'));
const sources = fs.readdirSync('src').filter((f) => f.endsWith('.js')).sort();
const task = process.argv[2];
if (task === 'build' || task === 'dev') {
  for (const dep of Object.keys(pkg.dependencies || {})) {  // turbo's ^build ran first, or this fails
    if (!fs.existsSync(join('..', dep.split('/').pop(), 'dist', 'index.js'))) throw new Error(`${dep} is not built`);
  }
}
if (task === 'dev') {  // a dev server on a free loopback port, until it is stopped
  const server = require('http').createServer((req, res) => res.end(`hello from ${pkg.name}\n`));
  server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
    console.log(`${pkg.name}: listening on http://127.0.0.1:${server.address().port}`);
  });
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
  return;
}
if (task === 'build') {
  fs.mkdirSync('dist', { recursive: true });
  fs.writeFileSync(join('dist', 'index.js'), sources.map((f) => fs.readFileSync(join('src', f), 'utf8')).join('\n'));
} else if (task === 'test') {
  const mod = require(join(process.cwd(), 'dist', 'index.js'));
  if (mod.check && !mod.check()) throw new Error(`${pkg.name}: self-check failed`);
} else if (task === 'lint') {
  const bad = sources.filter((f) => /\bvar\b/.test(fs.readFileSync(join('src', f), 'utf8')));
  if (bad.length) throw new Error(`use let or const, not var: ${bad.join(', ')}`);
} else {
  throw new Error(`unknown task ${task}`);
}
console.log(`${pkg.name}: ${task} ok`);
