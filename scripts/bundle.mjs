// Bundles what the CLI's commands and corral's worker threads run (tsc's output in dist/, with the
// node_modules packages they import) into dist/bundle/, for oclif to load (package.json
// `oclif.commands`). A process then holds a few dozen source texts instead of ~1,200 modules' (V8
// keeps every module's source for lazy compilation, with its per-module records), and each text
// without comments or indentation (docs/reliability.md "Memory footprint"). Identifiers keep their
// names, so stack traces in logs still name the functions.
//
// Code shared by several commands goes to dist/bundle/chunks/ (esbuild's splitting: a command
// loads only the chunks it reaches), and a module imported with `import()` stays a chunk of its own
// that loads at its first use. Left to node_modules: native addons, oclif (bin/run.js and the
// commands must share one copy of it), what is loaded only by a file path or `createRequire`, and
// the schema compilers (below).
// tsc's dist/ stays as it is: the agent, the CLI's hook and `caps lint` fast path, and benches run it.
import { readdirSync, rmSync } from 'node:fs'
import { join, relative } from 'node:path'
import { build } from 'esbuild'

const root = join(import.meta.dirname, '..')
const dist = join(root, 'dist')
const out = join(dist, 'bundle')

const walk = (dir) => readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
  e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.js') ? [join(dir, e.name)] : [])
const entry = (file, name) => ({ in: file, out: name ?? relative(dist, file).slice(0, -'.js'.length) })

rmSync(out, { recursive: true, force: true })
const result = await build({
  entryPoints: [
    ...walk(join(dist, 'commands')).map((f) => entry(f)),
    // Found by src/proc/build-files.ts from wherever the code starting them was bundled.
    entry(join(dist, 'audit/merkle/append-worker.js'), 'workers/append-worker'),
    entry(join(dist, 'audit/merkle/verify-worker.js'), 'workers/verify-worker'),
  ],
  outdir: out,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // ESM builds first where a package ships both (node's own `import` picks them too).
  mainFields: ['module', 'main'],
  minifyWhitespace: true,
  minifySyntax: true,
  // Every source text one byte per character: V8 keeps a text with any other character in two.
  charset: 'ascii',
  legalComments: 'none',
  sourcemap: 'linked',
  chunkNames: 'chunks/[name]-[hash]',
  logLevel: 'warning',
  external: [
    'better-sqlite3', 're2', 'pg-native', 'cpu-features', 'ssh2', 'fsevents',
    '@oclif/*', 'pino-pretty', 'thread-stream', 'react-devtools-core',
    // fastify requires its schema compilers inside functions; bundled, their text would sit in
    // serve's fastify chunk from the start although src/server/lazy-schemas.ts loads them (from
    // node_modules) only at a route's first request.
    'ajv', 'ajv-formats', 'fast-json-stringify', '@fastify/ajv-compiler', '@fastify/fast-json-stringify-compiler',
  ],
  // CommonJS packages inside an ES module still call `require` (node's built-ins, the externals).
  banner: { js: "import { createRequire as __corralRequire } from 'node:module'; const require = __corralRequire(import.meta.url);" },
  metafile: true,
})
const outputs = Object.values(result.metafile.outputs).filter((o) => o.entryPoint !== undefined || o.bytes > 0)
process.stdout.write(`bundled ${Object.keys(result.metafile.inputs).length} modules into ${outputs.length} files under dist/bundle/\n`)
