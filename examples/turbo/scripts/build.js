#!/usr/bin/env node
// Bundles src/*.js into dist/index.js; refuses to run before its workspace dependencies are built.
'use strict';
const fs = require('fs');
const path = require('path');

const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8'));
const deps = Object.keys(pkg.dependencies || {}).filter((d) => d.startsWith('@turbo/'));
for (const dep of deps) {
  const dist = path.join('..', dep.slice('@turbo/'.length), 'dist', 'index.js');
  if (!fs.existsSync(dist)) {
    console.error(`${pkg.name}: dependency ${dep} is not built (${dist} missing)`);
    process.exit(1);
  }
}
const sources = fs.readdirSync('src').filter((f) => f.endsWith('.js')).sort();
const body = sources.map((f) => `// ${f}\n${fs.readFileSync(path.join('src', f), 'utf8')}`).join('\n');
fs.mkdirSync('dist', { recursive: true });
fs.writeFileSync(path.join('dist', 'index.js'), `/* ${pkg.name} built from ${sources.length} files */\n${body}`);
console.log(`built ${pkg.name}: ${sources.length} module(s)`);
