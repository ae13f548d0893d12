// What a process loads before it serves anything is memory it holds for its whole life
// (docs/reliability.md "Memory footprint"): serve's face and `corral proxy`'s modules leave the
// packages only some deployments use to their first use.
import { spawnSync } from 'node:child_process'
import { join, resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

const root = resolve(import.meta.dirname, '../..')

/** The node_modules packages (CommonJS ones: they are in require.cache) loaded by importing `files` in a fresh process. */
function packagesLoadedBy(files: string[]): string[] {
  const script = `
    import { createRequire } from 'node:module'
    for (const f of ${JSON.stringify(files.map((f) => join(root, f)))}) await import(f)
    const cache = createRequire(import.meta.url).cache
    const names = new Set(Object.keys(cache).map((p) => /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\//.exec(p)?.[1]).filter(Boolean))
    process.stdout.write(JSON.stringify([...names].sort()))
  `
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: root, encoding: 'utf8', timeout: 120_000 })
  expect(r.status, r.stderr).toBe(0)
  return JSON.parse(r.stdout) as string[]
}

describe('modules loaded before first use', () => {
  it("serve's face loads neither the PostgreSQL driver nor the terminal log formatter", () => {
    const loaded = packagesLoadedBy(['src/serve/index.ts', 'src/server/index.ts'])
    expect(loaded).toContain('fastify') // the probe sees CommonJS packages
    expect(loaded).toContain('pino')
    expect(loaded.filter((p) => ['pg', 'pino-pretty', 'tsyringe', '@peculiar/asn1-schema'].includes(p))).toEqual([])
  })

  it("serve's face compiles no JSON schema at import: ajv and fastify's schema compilers wait for their first use", () => {
    const loaded = packagesLoadedBy(['src/serve/index.ts', 'src/server/index.ts', 'src/packs/index.ts', 'src/workspaces/index.ts'])
    expect(loaded).toContain('fastify')
    expect(loaded.filter((p) => ['ajv', 'ajv-formats', '@fastify/ajv-compiler', '@fastify/fast-json-stringify-compiler'].includes(p))).toEqual([])
  })

  it('`corral proxy` loads the proxy, not the API server (fastify and its plugins)', () => {
    const loaded = packagesLoadedBy(['src/serve/proxy-alone.ts', 'src/serve/proxy-workers.ts', 'src/server/logger.ts'])
    expect(loaded).toContain('pino')
    expect(loaded.filter((p) => p === 'fastify' || p.startsWith('@fastify/') || p === 'pg')).toEqual([])
  })
})
