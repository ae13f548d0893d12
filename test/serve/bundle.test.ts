// The built commands run from one bundle (scripts/bundle.mjs, dist/bundle/): a process holds a few
// dozen source texts instead of every module's (docs/reliability.md "Memory footprint"). Checked on
// the real binary: the modules `corral serve` and `corral proxy` load (recorded by a load
// hook), and the worker threads started from the bundle (the appender signs a checkpoint, `audit
// verify` runs its verify threads) with the console's files found beside it; and the manifest's
// text oclif caches is compact (scripts/compact-manifest.mjs).
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { afterAll, describe, expect, it } from 'vitest'
import { CORRAL_BIN, hermeticEnv, runCorral, startServe } from '../helpers/serve.js'

const root = resolve(import.meta.dirname, '../..')
const tmp = mkdtempSync(join(tmpdir(), 'corral-bundle-'))
afterAll(() => rmSync(tmp, { recursive: true, force: true }))

/** NODE_OPTIONS that make a process append the URL of every file it loads as a module to `log`. */
function recordImports(log: string): Record<string, string> {
  const hooks = join(tmp, 'hooks.mjs')
  writeFileSync(hooks, `
    import { appendFileSync } from 'node:fs'
    export async function load(url, context, next) {
      if (url.startsWith('file:')) appendFileSync(process.env.CORRAL_TEST_IMPORTS, url + '\\n')
      return next(url, context)
    }`)
  const preload = join(tmp, 'preload.mjs')
  writeFileSync(preload, `import { register } from 'node:module'; register(${JSON.stringify(pathToFileURL(hooks).href)})`)
  return { NODE_OPTIONS: `--import ${preload}`, CORRAL_TEST_IMPORTS: log }
}

/** From the log: corral's own files loaded (relative to the package root) and the node_modules packages loaded as modules. */
function split(log: string): { own: string[]; packages: string[] } {
  const files = [...new Set(log.split('\n').filter(Boolean))].map((u) => new URL(u).pathname)
  const own = files.filter((f) => f.startsWith(`${root}/`) && !f.includes('/node_modules/')).map((f) => f.slice(root.length + 1))
  const packages = [...new Set(files.map((f) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(f)?.[1]).filter((p): p is string => !!p))]
  return { own, packages }
}

/** Packages serve and the proxy run on, loaded from node_modules when not bundled. */
const BUNDLED = ['kysely', 'fastify', 'undici', 'pino', 'yaml', '@marcbachmann/cel-js', 'ws', 'dns-packet']

describe('the built commands run from the bundle', () => {
  it('`corral serve` imports its code from dist/bundle/ (a few dozen files), none of tsc\'s modules, none of the packages it bundles', async () => {
    const log = join(tmp, 'serve-imports.txt')
    writeFileSync(log, '')
    const serve = await startServe({ env: { ...recordImports(log), CORRAL_AUDIT_CHECKPOINT_INTERVAL_MS: '1000' }, args: ['--allow-unenforced-limits'] })
    try {
      const { own, packages } = split(readFileSync(log, 'utf8'))
      expect(own.filter((f) => f.startsWith('dist/') && !f.startsWith('dist/bundle/'))).toEqual([])
      expect(own.filter((f) => f.startsWith('dist/bundle/')).length).toBeGreaterThan(0)
      expect(own.length).toBeLessThan(100)
      // kysely, fastify, undici … are inside the bundle; from node_modules come the externals (oclif, the native addons).
      expect(packages).toContain('better-sqlite3')
      expect(packages.filter((p) => BUNDLED.includes(p))).toEqual([])
      // fastify's schema compilers are left out of the bundle: src/server/lazy-schemas.ts loads
      // them from node_modules at a route's first request, so an idle serve holds none of their text.
      const withCompilers = own.filter((f) => /\bvar require_(ajv|fast_json_stringify)\b/.test(readFileSync(join(root, f), 'utf8')))
      expect(withCompilers).toEqual([])
      expect(packages.filter((p) => ['ajv', 'fast-json-stringify'].includes(p))).toEqual([])

      // The appender's thread (dist/bundle/workers/) signs a checkpoint over the bootstrap's rows,
      // and `audit verify` checks them in its own verify threads.
      let verified = ''
      for (let i = 0; i < 60 && !/verified against [1-9]/.test(verified); i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, 500))
        const r = await runCorral(['audit', 'verify', '--api-url', serve.url, '--token', serve.adminKey])
        expect(r.stderr).not.toMatch(/Cannot find module|ERR_MODULE_NOT_FOUND/)
        verified = r.stdout
      }
      expect(verified).toMatch(/ok: \S+: \d+ rows verified against [1-9]\d* signed checkpoint/)
      expect(serve.output()).not.toMatch(/thread failed|Cannot find module/)

      // The console's files, found from the bundle's root.
      const page = await fetch(`${serve.url}/`)
      expect(page.status).toBe(200)
      expect(await page.text()).toMatch(/<html/i)
    } finally {
      await serve.stop()
    }
  }, 120_000)

  it('the oclif manifest, whose text oclif keeps for the process\'s life, is compact and one byte a character', () => {
    const text = readFileSync(join(root, 'oclif.manifest.json'), 'utf8')
    expect(text.trimEnd()).not.toMatch(/\n/)
    expect(text).not.toMatch(/[^\x00-\x7f]/)
    const manifest = JSON.parse(text) as { commands: Record<string, { description?: string }> }
    expect(manifest.commands.serve).toBeDefined()
    // Escaped, not dropped: descriptions keep their characters once parsed.
    expect(Object.values(manifest.commands).some((c) => /[^\x00-\x7f]/.test(c.description ?? ''))).toBe(true)
  })

  it('`corral proxy` imports its code from dist/bundle/ too', async () => {
    const log = join(tmp, 'proxy-imports.txt')
    writeFileSync(log, '')
    const dataDir = join(tmp, 'proxy-data')
    const child = spawn(process.execPath, [CORRAL_BIN, 'proxy', '--port', '0', '--data-dir', dataDir], {
      env: { ...hermeticEnv(), CORRAL_LOG_LEVEL: 'warn', ...recordImports(log) }, stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stderr.on('data', (c) => (out += String(c)))
    try {
      await new Promise<void>((ready, failed) => {
        child.stdout.on('data', (c) => { out += String(c); if (/ready: http:\/\//.test(out)) ready() })
        child.once('exit', (code) => failed(new Error(`corral proxy exited with ${code}:\n${out}`)))
      })
      const { own, packages } = split(readFileSync(log, 'utf8'))
      expect(own.filter((f) => f.startsWith('dist/') && !f.startsWith('dist/bundle/'))).toEqual([])
      expect(own.length).toBeLessThan(100)
      expect(packages.filter((p) => BUNDLED.includes(p))).toEqual([])
    } finally {
      child.kill('SIGTERM')
      await new Promise((r) => child.once('exit', r))
    }
  }, 60_000)
})
