#!/usr/bin/env node
// The example's one script, run in a project: `node ../../tools/task.js build|test|lint`.
'use strict';
const fs = require('fs');
const { join } = require('path');

const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8'));
const sources = fs.readdirSync('src').filter((f) => f.endsWith('.js')).sort();
const task = process.argv[2];
if (task === 'build') {
  for (const dep of Object.keys(pkg.dependencies || {})) {  // nx's ^build ran first, or this fails
    const built = ['libs', 'apps'].some((d) => fs.existsSync(join('..', '..', d, dep, 'dist', 'index.js')));
    if (!built) throw new Error(`${dep} is not built`);
  }
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
