// Serve's data dir inside a bound path (`./.corral` in the checkout, which is bound read-only as
// the corral package) must be invisible to every sandbox: it holds the store (with the
// capability-token key), admin.key, the CA key, all orgs' packs and staged uploads. So must a
// SQLite store file kept elsewhere under a bound path. The package's own files stay readable.
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runtimeOptions } from '../../src/serve/index.js'
import { storeFiles as sqliteFiles } from '../../src/store/index.js'
import { limitsFromEnv } from '../../src/runtime/limits.js'
import { bwrapAvailable } from './helpers.js'
import { localRuntime, type LocalRuntimeUnderTest } from './drivers.js'

const available = await bwrapAvailable()

describe('sqliteFiles', () => {
  it('names a SQLite store file and its journal siblings, resolved; nothing for Postgres or memory', () => {
    expect(sqliteFiles('sqlite:/srv/x/corral.db')).toEqual(['/srv/x/corral.db', '/srv/x/corral.db-wal', '/srv/x/corral.db-shm', '/srv/x/corral.db-journal'])
    expect(sqliteFiles('sqlite:rel.db')[0]).toBe(join(process.cwd(), 'rel.db'))
    expect(sqliteFiles('postgres://u@h/db')).toEqual([])
    expect(sqliteFiles('sqlite::memory:')).toEqual([])
    expect(sqliteFiles(undefined)).toEqual([])
  })
})

describe('runtimeOptions (serve → runtime)', () => {
  it('hides serve\'s data dir and its SQLite store, and hands over the limits serve read', () => {
    const limits = limitsFromEnv({ CORRAL_WORKSPACE_MEMORY_MB: '512', CORRAL_WORKSPACE_DISK_MB: '7' })
    const o = runtimeOptions({ dataDir: '/srv/corral', dbUrl: 'sqlite:/opt/app/store.db' }, limits, new URL('http://[::1]:4100'), () => {})
    expect(o).toMatchObject({ root: '/srv/corral/runtime', proxy: { host: '::1', port: 4100 }, limits: { memoryMb: 512, diskMb: 7 } })
    expect(o.hidden).toEqual(['/srv/corral', ...sqliteFiles('sqlite:/opt/app/store.db')])
    expect(runtimeOptions({ dataDir: '/srv/corral' }, limits, new URL('http://127.0.0.1:1'), () => {}).hidden).toEqual(['/srv/corral'])
  })
})

describe.skipIf(!available)('paths hidden from the sandbox', () => {
  let top: string
  let pkg: string
  let dataDir: string
  let otherDb: string

  beforeAll(async () => {
    top = await mkdtemp(join(tmpdir(), 'corral-hidden-'))
    pkg = join(top, 'pkg')
    dataDir = join(pkg, '.corral')
    otherDb = join(pkg, 'elsewhere.db')
    await mkdir(join(dataDir, 'packs', 'sha256-abc'), { recursive: true })
    await writeFile(join(pkg, 'package-file.txt'), 'package')
    await writeFile(join(dataDir, 'admin.key'), 'secret-admin-key')
    await writeFile(join(dataDir, 'corral.db'), 'secret-db')
    await writeFile(join(dataDir, 'packs', 'sha256-abc', 'x'), 'secret-pack')
    await writeFile(otherDb, 'secret-other-db')
    await writeFile(`${otherDb}-wal`, 'secret-wal')
  })

  afterAll(async () => {
    await rm(top, { recursive: true, force: true })
  })

  // Reads each path from inside a sandbox: its content, or "-" when it cannot be read.
  async function readInside(runtime: LocalRuntimeUnderTest): Promise<Record<string, string>> {
    const paths = [join(pkg, 'package-file.txt'), join(dataDir, 'admin.key'), join(dataDir, 'corral.db'), join(dataDir, 'packs', 'sha256-abc', 'x'),
      otherDb, `${otherDb}-wal`, join(dataDir, 'runtime', 'shared', 'init.mjs')]
    const script = paths.map((p) => `printf '%s\\t%s\\n' '${p}' "$(cat '${p}' 2>/dev/null | head -c 20 || true)"`).join('; ')
    const ws = await runtime.provision({ workspaceId: `ws_hidden_${randomUUID().slice(0, 8)}` })
    await runtime.startAgent(ws.workspaceId, { command: ['sh', '-c', `{ ${script}; } > report.tmp && mv report.tmp report.txt; sleep 30`], proxyToken: 't' })
    try {
      const report = join(ws.dataDir, 'report.txt')
      for (let i = 0; i < 400 && !(await readFile(report).then(() => true, () => false)); i++) await new Promise((r) => setTimeout(r, 25))
      const lines = (await readFile(report, 'utf8')).trim().split('\n').map((l) => l.split('\t'))
      return Object.fromEntries(lines.map(([p, v]) => [p!.replace(top, ''), v || '-']))
    } finally {
      await runtime.stopAgent(ws.workspaceId)
      await runtime.close()
    }
  }

  const make = (hidden?: string[]) => localRuntime({
    root: join(dataDir, 'runtime'), proxy: { host: '127.0.0.1', port: 9 }, warn: () => {}, stopGraceMs: 500,
    readOnlyPaths: [pkg], ...(hidden ? { hidden } : {}),
  })

  it('without hiding, a bound package root would expose them (the case the option exists for)', async () => {
    const seen = await readInside(make())
    expect(seen['/pkg/.corral/admin.key']).toBe('secret-admin-key')
    expect(seen['/pkg/elsewhere.db']).toBe('secret-other-db')
  })

  it('hides the data dir (store, keys, packs, runtime root) and a SQLite file elsewhere; the package stays readable', async () => {
    const seen = await readInside(make([dataDir, ...sqliteFiles(`sqlite:${otherDb}`)]))
    expect(seen).toEqual({
      '/pkg/package-file.txt': 'package',
      '/pkg/.corral/admin.key': '-',
      '/pkg/.corral/corral.db': '-',
      '/pkg/.corral/packs/sha256-abc/x': '-',
      '/pkg/elsewhere.db': '-',
      '/pkg/elsewhere.db-wal': '-',
      '/pkg/.corral/runtime/shared/init.mjs': '-',
    })
  })
})
