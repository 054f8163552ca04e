// Evaluates vx.config.{js,mjs,cjs,ts,mts} modules for vx: every config of a run in
// one Node process, the repository's own Node.
//
// stdin:  {"root": "/abs/workspace", "files": ["/abs/.../vx.config.ts", ...], "answer": "/tmp/…/answer.json"}
// answer: {"results": {file: {"value": data} | {"error": {"message", "field", "hint"}}},
//          "deps": [every file the configs loaded or read], "edges": [[importer, imported], ...],
//          "env": [names read], "envWhole": bool}
// The answer goes to a file: a config may print to stdout (vx shows that on its stderr).
//
// The loader hooks (hooks.mjs) transpile TypeScript and report each file loaded, so vx can keep the
// evaluated objects until one of those files (or a variable read) changes.
import fs from 'node:fs';
import { createRequire, register, syncBuiltinESMExports } from 'node:module';
import { resolve as resolvePath } from 'node:path';
import { MessageChannel } from 'node:worker_threads';
import { fileURLToPath, pathToFileURL } from 'node:url';

const SENTINEL = 'data:text/javascript,export%20default%200%3B%2F%2Fvx-sentinel';

class Refusal extends Error {
  constructor(message, field, hint) {
    super(message);
    this.field = field;
    this.hint = hint;
  }
}

async function readInput() {
  let text = '';
  process.stdin.setEncoding('utf8');
  for await (const chunk of process.stdin) text += chunk;
  return JSON.parse(text);
}

// A config may not write the environment: a value it set would leak into every
// config evaluated after it, and into nothing vx keys. The write is refused where it was made.
function refuseWrite(key, root) {
  const name = typeof key === 'string' ? key : String(key);
  const frame = String(new Error().stack || '').split('\n').slice(1)
    .find((line) => line.includes(root) && !line.includes('/vx/config/evaluate.mjs'));
  const where = frame ? ` (at ${frame.trim().replace(/^at /, '').replace(/^file:\/\//, '')})` : '';
  throw new Refusal(`the config writes \`process.env.${name}\`${where}: a config may not write the environment`, '',
    `read variables, never set them: set ${name} in the shell or in the task's env, or compute the value in the config and use it there`);
}

// Which variables the configs read: a config may compute values from the environment, and a kept
// evaluation holds only while those values do.
function watchEnv(record, root) {
  const real = process.env;
  process.env = new Proxy(real, {
    set(target, key) {
      refuseWrite(key, root);
    },
    defineProperty(target, key) {
      refuseWrite(key, root);
    },
    deleteProperty(target, key) {
      refuseWrite(key, root);
    },
    get(target, key) {
      if (typeof key === 'string') record.names.add(key);
      return Reflect.get(target, key);
    },
    has(target, key) {
      if (typeof key === 'string') record.names.add(key);
      return Reflect.has(target, key);
    },
    ownKeys(target) {
      record.whole = true;
      return Reflect.ownKeys(target);
    },
  });
}

function at(path, key) {
  return typeof key === 'number' ? `${path}[${key}]` : path ? `${path}.${key}` : key;
}

// A project config is JSON data. Refuse what JSON cannot carry instead of dropping it.
function plain(value, path, seen) {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  const where = path || 'the default export';
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Refusal(`\`${where}\` is ${value}, which JSON cannot hold`, path, 'write a finite number');
    return value;
  }
  if (typeof value !== 'object') {
    const kind = value === undefined ? 'undefined' : typeof value;
    throw new Refusal(`\`${where}\` is ${kind === 'function' ? 'a function' : kind}; a config is JSON data`, path,
      'compute the value when the config loads and write the result, e.g. a string or an object');
  }
  if (seen.has(value)) throw new Refusal(`\`${where}\` refers back to an object that contains it (a cycle)`, path, 'write the value out; a config is a tree of JSON data');
  seen.add(value);
  let out;
  if (Array.isArray(value)) {
    out = [];
    for (let i = 0; i < value.length; i++) {
      if (!(i in value) || value[i] === undefined) throw new Refusal(`\`${at(path, i)}\` is undefined`, at(path, i), 'remove the entry');
      out.push(plain(value[i], at(path, i), seen));
    }
  } else {
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) {
      const name = (value.constructor && value.constructor.name) || 'non-plain';
      throw new Refusal(`\`${where}\` is a ${name} object; a config is JSON data`, path, 'write a plain object, string or array');
    }
    out = {};
    for (const key of Reflect.ownKeys(value)) {
      if (typeof key === 'symbol') throw new Refusal(`\`${where}\` has a symbol key`, path, 'use string keys');
      const d = Object.getOwnPropertyDescriptor(value, key);
      if (d.get || d.set) throw new Refusal(`\`${at(path, key)}\` is a getter or setter`, at(path, key), 'write the value itself');
      if (!d.enumerable || d.value === undefined) continue; // undefined means absent
      out[key] = plain(d.value, at(path, key), seen);
    }
  }
  seen.delete(value);
  return out;
}

function describe(error, root) {
  if (error instanceof Refusal) return { message: error.message, field: error.field || '', hint: error.hint };
  const message = error && error.message ? error.message : String(error);
  if (message === 'VX_NO_TRANSPILER') {
    return {
      message: 'a TypeScript config needs a transpiler, and this workspace has none',
      field: '',
      hint: 'add `typescript` (5.x) or `esbuild` to the root devDependencies and install, or write vx.config.mjs',
    };
  }
  const frame = String((error && error.stack) || '').split('\n').find((line) => line.includes(root));
  const where = frame ? ` (${frame.trim().replace(/^at /, '')})` : '';
  return { message: `evaluating it failed: ${message.split('\n')[0]}${where}`, field: '', hint: 'fix the config so it loads in Node' };
}

// Files a config reads itself (a JSON it parses, a command in a text file) count like the modules
// it imports: the node:fs readers record their path first. Missing paths count too (a later
// file there changes what the config computes).
function watchFs(deps) {
  const asPath = (p) => (p instanceof URL ? fileURLToPath(p) : typeof p === 'string' ? resolvePath(p) : null);
  const wrap = (holder, name) => {
    const original = holder[name];
    if (typeof original !== 'function') return;
    holder[name] = function (path, ...rest) {
      const file = asPath(path);
      if (file) deps.add(file);
      return original.call(this, path, ...rest);
    };
  };
  for (const name of ['readFileSync', 'existsSync', 'statSync', 'lstatSync', 'readdirSync', 'accessSync',
    'readFile', 'stat', 'readdir', 'access']) wrap(fs, name);
  for (const name of ['readFile', 'stat', 'readdir', 'access']) wrap(fs.promises, name);
  syncBuiltinESMExports(); // `import { readFileSync } from 'node:fs'` sees the wrapped ones
}

const input = await readInput();
const deps = new Set();
const { port1, port2 } = new MessageChannel();
let settled;
const drained = new Promise((resolve) => { settled = resolve; });
const edges = [];
port1.on('message', (message) => {
  if (message.done) settled();
  else if (message.edge) edges.push(message.edge);
  else deps.add(message.file);
});
register(new URL('./hooks.mjs', import.meta.url), { data: { port: port2, root: input.root }, transferList: [port2] });

const env = { names: new Set(), whole: false };
watchEnv(env, input.root);
watchFs(deps);
const results = {};
for (const file of input.files) {
  try {
    const module = await import(pathToFileURL(file).href);
    let value = module.default;
    if (value && typeof value.then === 'function') value = await value;
    if (value === undefined) throw new Refusal('the module has no default export', '', 'write `export default { tasks: { … } }`');
    results[file] = { value: plain(value, '', new Set()) };
  } catch (error) {
    results[file] = { error: describe(error, input.root) };
  }
}
await import(SENTINEL); // the hooks report files in order: once this one is heard, all are
await drained;
port1.close();
for (const file of Object.keys(createRequire(import.meta.url).cache)) deps.add(file); // require()d files
fs.writeFileSync(input.answer, JSON.stringify({ results, deps: [...deps].sort(), edges, env: [...env.names].sort(),
  envWhole: env.whole }));
