#!/usr/bin/env node
// `vx` from npm: run this platform's standalone build (docs/install.md), preferring the one
// installed in the repository over this one, with signals and the exit code passed through.
"use strict";
const { spawn } = require("child_process");
const fs = require("fs");
const path = require("path");

const SCOPE = "@vx-build"; // placeholder names until published (docs/install.md)
const PLATFORM = `${SCOPE}/vx-${process.platform}-${process.arch}`;

// A repo-local install wins over this one (a global or npx-cached vx), as turbo's does.
function packageDir() {
  const self = fs.realpathSync(path.join(__dirname, ".."));
  for (let dir = process.cwd(); ; dir = path.dirname(dir)) {
    const local = path.join(dir, "node_modules", SCOPE, "vx");
    if (fs.existsSync(path.join(local, "package.json"))) return fs.realpathSync(local);
    if (path.dirname(dir) === dir) return self;
  }
}

function binary(base) {
  try {
    const pkg = require.resolve(`${PLATFORM}/package.json`, { paths: [base] });
    return path.join(path.dirname(pkg), "bin", "vx");
  } catch {
    const version = require(path.join(base, "package.json")).version;
    process.stderr.write(
      `vx: ${PLATFORM} is not installed, so there is no vx to run on ${process.platform}-${process.arch}\n` +
        `  hint: reinstall without --no-optional/--omit=optional (npm i -D ${SCOPE}/vx@${version}), ` +
        "or see docs/install.md for the other ways to install vx\n",
    );
    process.exit(2);
  }
}

// At a terminal, vx shares our process group, so the keys' signals (Ctrl-C, Ctrl-\, a hangup)
// reach it already and we only outlive them: forwarding them too would be a second signal, which
// makes vx kill its tasks without their grace. Without one, vx gets its own group and each kind
// of signal sent to us is passed on once (npx passes its own on to us as well: one, not two).
const terminal = process.stdin.isTTY || process.stdout.isTTY || process.stderr.isTTY;
const child = spawn(binary(packageDir()), process.argv.slice(2), {
  stdio: "inherit",
  detached: !terminal,
});
const passed = new Set();
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"]) {
  process.on(sig, () => {
    if ((terminal && sig !== "SIGTERM") || passed.has(sig)) return;
    passed.add(sig);
    child.kill(sig);
  });
}
child.on("error", (err) => {
  process.stderr.write(`vx: could not start ${child.spawnfile}: ${err.message}\n`);
  process.exit(2);
});
child.on("exit", (code, signal) => {
  const os = require("os");
  process.exitCode = signal ? 128 + os.constants.signals[signal] : code;
});
