#!/usr/bin/env node
// A tiny linter: no `var`, no trailing whitespace.
'use strict';
const fs = require('fs');
const path = require('path');
let problems = 0;
for (const f of fs.readdirSync('src').filter((n) => n.endsWith('.js'))) {
  fs.readFileSync(path.join('src', f), 'utf8').split('\n').forEach((line, i) => {
    if (/\bvar\b/.test(line) || /\s+$/.test(line)) {
      console.error(`src/${f}:${i + 1}: ${/\bvar\b/.test(line) ? 'use let/const, not var' : 'trailing whitespace'}`);
      problems++;
    }
  });
}
if (problems) process.exit(1);
console.log('lint: clean');
