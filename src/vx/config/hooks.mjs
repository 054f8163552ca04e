// Module loader hooks for evaluate.mjs: report every file a config loads (so vx knows what its
// evaluation depends on) and transpile TypeScript with the workspace's own `typescript` or
// `esbuild` (Node 20 runs no TypeScript itself).
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const TYPESCRIPT = /\.(ts|mts)$/;
let port;
let root;
let transpiler;

export async function initialize(data) {
  port = data.port;
  root = data.root;
}

// TypeScript's own conventions: `./preset` and `./preset.js` may name `./preset.ts`.
// Every import is reported as an edge (importer, imported), a cached module's too: a module two
// configs import loads once, and only the edges tie it to both (for `--affected`).
export async function resolve(specifier, context, next) {
  const found = await resolveFile(specifier, context, next);
  const parent = context.parentURL;
  if (parent && parent.startsWith('file:') && found.url && found.url.startsWith('file:')) {
    port.postMessage({ edge: [fileURLToPath(parent), fileURLToPath(found.url)] });
  }
  return found;
}

// The typing helpers' module, when the workspace has not installed vx's npm package.
const HELPERS = '@vx-build/vx/config';

async function resolveFile(specifier, context, next) {
  try {
    return await next(specifier, context);
  } catch (error) {
    if (specifier === HELPERS) {
      return { url: new URL('./define.mjs', import.meta.url).href, shortCircuit: true };
    }
    const parent = context.parentURL;
    if (!parent || !parent.startsWith('file:') || !/^\.{1,2}\//.test(specifier)) throw error;
    const stem = specifier.replace(/\.(m?js)$/, '');
    for (const candidate of [`${stem}.ts`, `${stem}.mts`, `${stem}/index.ts`, `${stem}.mjs`, `${stem}.js`]) {
      const url = new URL(candidate, parent);
      if (existsSync(fileURLToPath(url))) return { url: url.href, shortCircuit: true };
    }
    throw error;
  }
}

export async function load(url, context, next) {
  if (url.startsWith('data:') && url.endsWith('vx-sentinel')) {
    port.postMessage({ done: true });
    return { format: 'module', source: 'export default 0;', shortCircuit: true };
  }
  if (!url.startsWith('file:')) return next(url, context);
  const file = fileURLToPath(url);
  port.postMessage({ file });
  if (!TYPESCRIPT.test(file)) return next(url, context);
  return { format: 'module', source: transpile(readFileSync(file, 'utf8'), file), shortCircuit: true };
}

function transpile(source, file) {
  transpiler ??= findTranspiler();
  return transpiler(source, file);
}

function findTranspiler() {
  const require = createRequire(pathToFileURL(`${root}/package.json`));
  for (const [name, make] of [['typescript', fromTypescript], ['esbuild', fromEsbuild]]) {
    let module;
    try {
      module = require(name);
    } catch {
      continue;
    }
    const made = make(module);
    if (made) return made;
  }
  throw new Error('VX_NO_TRANSPILER');
}

function fromTypescript(ts) {
  if (typeof ts.transpileModule !== 'function') return null; // TypeScript 7's package has no JS API
  return (source, file) => {
    const out = ts.transpileModule(source, {
      fileName: file,
      reportDiagnostics: true,
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    });
    const problem = (out.diagnostics || []).find((d) => d.category === ts.DiagnosticCategory.Error);
    if (problem) {
      const { line, character } = problem.file.getLineAndCharacterOfPosition(problem.start);
      throw new Error(`${file}:${line + 1}:${character + 1}: ${ts.flattenDiagnosticMessageText(problem.messageText, ' ')}`);
    }
    return out.outputText;
  };
}

function fromEsbuild(esbuild) {
  if (typeof esbuild.transformSync !== 'function') return null;
  return (source, file) => esbuild.transformSync(source, { loader: 'ts', format: 'esm', sourcefile: file, target: 'es2022' }).code;
}
