// The build every fuzzed task runs (tests/scenarios/support/key_fuzz.py): it reads exactly what its task
// declares — the files its input globs match, its env, its upstream builds' outputs, the sources
// of source-only dependencies — and writes all of it, labelled, to dist/out.txt. It appends its
// project's name to a run log outside the workspace, so the fuzzer sees that it ran without
// asking vx. Glob and ignore rules are written here on their own, apart from the oracle's.
//
// usage: node ../../tools/build.js <salt> [format] [late]
const fs = require("fs");
const path = require("path");
const { execFileSync, spawn } = require("child_process");

const root = path.resolve(__dirname, "..");
const salt = process.argv[2];
const flags = new Set(process.argv.slice(3));
const pkg = JSON.parse(fs.readFileSync("package.json", "utf8"));
const name = pkg.name;

// The workspace's .gitignore, in the forms the generator writes: `name/` (a directory anywhere),
// `*.ext` and `name` (a file anywhere). A tracked file is never ignored, as git has it.
const rules = fs.readFileSync(path.join(root, ".gitignore"), "utf8").split("\n").filter(Boolean);
const IGNORED_DIRS = new Set(rules.filter((r) => r.endsWith("/")).map((r) => r.slice(0, -1)));
const suffixes = rules.filter((r) => r.startsWith("*")).map((r) => r.slice(1));
const names = new Set(rules.filter((r) => !r.endsWith("/") && !r.startsWith("*")));
const tracked = new Set(execFileSync("git", ["ls-files", "-z", "--full-name"], { cwd: root, encoding: "utf8" }).split("\0"));
function ignored(rel, abs) {
  const parts = rel.split("/");
  const base = parts[parts.length - 1];
  if (parts.slice(0, -1).some((p) => IGNORED_DIRS.has(p))) return true;
  if (!(suffixes.some((s) => base.endsWith(s)) || names.has(base))) return false;
  return !tracked.has(path.relative(root, abs));
}

// Every file under dir (following symlinks, as a compiler would), project-relative, sorted;
// `onDisk`: gitignored ones too (turbo's explicit globs), but never node_modules, .vx or dist.
const ON_DISK_SKIP = new Set(["node_modules", ".vx", "dist"]);
function walk(dir, onDisk = false) {
  const out = [];
  // Only the directories above guard against a link cycle: one walked through a link elsewhere
  // is still walked where it really is.
  (function go(abs, rel, above) {
    let real;
    try { real = fs.realpathSync(abs); } catch { return; }
    if (above.has(real)) return;
    const below = new Set(above).add(real);
    for (const entry of fs.readdirSync(abs).sort()) {
      const r = rel ? rel + "/" + entry : entry;
      const a = path.join(abs, entry);
      let st;
      try { st = fs.statSync(a); } catch { continue; }
      const skip = onDisk ? ON_DISK_SKIP : IGNORED_DIRS;
      if (st.isDirectory()) { if (!skip.has(entry) && entry !== ".git") go(a, r, below); }
      else if (onDisk || !ignored(r, a)) out.push(r);
    }
  })(dir, "", new Set());
  return out.sort();
}

function globRegex(glob, classes) {
  let re = "";
  const segs = glob.split("/");
  segs.forEach((seg, i) => {
    const last = i === segs.length - 1;
    if (seg === "**") { re += last ? ".*" : "(?:[^/]*/)*"; return; }
    for (let j = 0; j < seg.length; j++) {
      const c = seg[j];
      if (c === "*") re += "[^/]*";
      else if (c === "?") re += "[^/]";
      else if (c === "{") { const k = seg.indexOf("}", j); re += "(?:" + seg.slice(j + 1, k).split(",").map(esc).join("|") + ")"; j = k; }
      else if (c === "[" && classes) { const k = seg.indexOf("]", j); re += "[" + seg.slice(j + 1, k) + "]"; j = k; }
      else re += esc(c);
    }
    if (!last) re += "/";
  });
  return new RegExp("^" + re + "$");
}
function esc(s) { return s.replace(/[.*+?^${}()|[\]\\\/]/g, "\\$&"); }

function matches(rel, glob, classes) {
  if (!/[*?{]/.test(glob) && !(classes && glob.includes("["))) return rel === glob || rel.startsWith(glob + "/");
  return globRegex(glob, classes).test(rel);
}

function select(files, globs, classes) {
  const pos = globs.filter((g) => !g.startsWith("!"));
  const neg = globs.filter((g) => g.startsWith("!")).map((g) => g.slice(1));
  return files.filter((f) => pos.some((g) => matches(f, g, classes)) && !neg.some((g) => matches(f, g, classes)));
}

// What a task declares: its vx.config.json, or (a turbo.json-only workspace) the root turbo.json's
// definition for the package (`pN#build`, else the shared `build`). Root-relative inputs: vx's
// inputs.workspaceFiles, turbo's $TURBO_ROOT$/ prefix.
const turboTasks = fs.existsSync(path.join(root, "turbo.json"))
  ? JSON.parse(fs.readFileSync(path.join(root, "turbo.json"), "utf8")).tasks : null;
function declaration(dir, pkgName) {
  if (fs.existsSync(path.join(dir, "vx.config.json"))) {
    const task = JSON.parse(fs.readFileSync(path.join(dir, "vx.config.json"), "utf8")).tasks.build;
    return { globs: task.cache.inputs.files, rootGlobs: task.cache.inputs.workspaceFiles || [],
      envNames: task.cache.inputs.env || [], classes: false, explicit: [] };
  }
  const task = turboTasks[pkgName + "#build"] || turboTasks.build;
  // `"inputs": []` is turbo's default set, as no `inputs` is
  const inputs = task.inputs && task.inputs.length ? task.inputs : ["$TURBO_DEFAULT$"];
  const all = inputs.map((g) => (g === "$TURBO_DEFAULT$" ? "**" : g));
  return {
    globs: all.filter((g) => !g.startsWith("$TURBO_ROOT$/")),
    rootGlobs: all.filter((g) => g.startsWith("$TURBO_ROOT$/")).map((g) => g.slice("$TURBO_ROOT$/".length)),
    envNames: task.env || [], classes: true,
    explicit: inputs.filter((g) => g !== "$TURBO_DEFAULT$" && !g.startsWith("$TURBO_ROOT$/")),
  };
}

// The project-relative files a declaration's globs pick in dir.
function picked(dir, d) {
  const at = (f) => path.join(dir, f);
  // A literal input names its file even when git ignores it (a declared .env is read).
  const literal = d.globs.filter((g) => !g.startsWith("!") && !/[*?{[]/.test(g) && fs.existsSync(at(g)) && fs.statSync(at(g)).isFile());
  // turbo: every glob but $TURBO_DEFAULT$ matches the files on disk, gitignored ones included.
  const turboOnDisk = d.explicit.some((g) => !g.startsWith("!"))
    ? select(walk(dir, true), [...d.explicit, ...d.globs.filter((g) => g.startsWith("!"))], d.classes) : [];
  return [...new Set([...select(walk(dir), d.globs, d.classes), ...literal, ...turboOnDisk])].sort();
}

const { rootGlobs, envNames, classes } = declaration(".", name);
const lines = [`task ${name} salt ${salt}`];
const chosen = picked(".", declaration(".", name));
for (const f of chosen) lines.push(`file ${f}`, fs.readFileSync(f, "utf8"));
if (rootGlobs.length) {
  for (const f of select(walk(root, classes), rootGlobs, classes)) lines.push(`ws ${f}`, fs.readFileSync(path.join(root, f), "utf8"));
}
for (const e of [...envNames].sort()) lines.push(e in process.env ? `env ${e}=${process.env[e]}` : `env ${e} unset`);
const deps = pkg.dependencies || {};
if ("next" in deps) {  // framework env: what Next.js inlines into a build
  for (const e of Object.keys(process.env).filter((k) => k.startsWith("NEXT_PUBLIC_")).sort()) lines.push(`env ${e}=${process.env[e]}`);
}
for (const dep of Object.keys(deps).sort()) {
  const dir = path.join(root, "packages", dep);
  if (!fs.existsSync(dir)) continue;
  const depPkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  const built = fs.existsSync(path.join(dir, "vx.config.json")) || (depPkg.scripts && depPkg.scripts.build);
  if (built) lines.push(`up ${dep}`, fs.readFileSync(path.join(dir, "dist", "out.txt"), "utf8"));
  else {
    // A source-only dependency's sources (src/, as git sees them): under turbo.json only those its
    // no-op's definition picks — turbo keys that task by them, and reading more is an undeclared
    // read turbo serves stale as well; vx's implicit build keys every file of the project.
    const keyed = turboTasks ? new Set(picked(dir, declaration(dir, dep))) : null;
    for (const f of walk(path.join(dir, "src"))) {
      if (!keyed || keyed.has("src/" + f)) lines.push(`src ${dep} ${f}`, fs.readFileSync(path.join(dir, "src", f), "utf8"));
    }
  }
}
fs.mkdirSync("dist", { recursive: true });
fs.writeFileSync("dist/out.txt", lines.join("\n") + "\n");
fs.appendFileSync(path.join(root, "..", "runs.log"), name + "\n");

// A formatter's habit: write an input back with the bytes it already has.
if (flags.has("format") && chosen.length) fs.writeFileSync(chosen[0], fs.readFileSync(chosen[0]));

// A process the task leaves behind, writing an output once vx is done (the fuzzer opens the gate):
// in the task's process group, or (`detached`) in a session of its own.
if (flags.has("late")) {
  const late = `const fs=require("fs");const t=Date.now();` +
    `(function w(){if(fs.existsSync(${JSON.stringify(path.join(root, "..", "gate"))})||Date.now()-t>5000){` +
    `fs.writeFileSync("dist/late.txt","late "+${JSON.stringify(salt)}+"\\n");` +
    `fs.appendFileSync(${JSON.stringify(path.join(root, "..", "late.log"))},${JSON.stringify(name)}+"\\n")}else setTimeout(w,5)})()`;
  spawn(process.execPath, ["-e", late], { detached: flags.has("detached"), stdio: "ignore" }).unref();
}
