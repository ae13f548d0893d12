// A throwaway PostgreSQL 15 cluster for tests that stop and start the database: initdb into a temp
// dir, owned by and run as `postgres` (runuser), on a free port, trust auth on 127.0.0.1 only. The
// shared cluster on 5432 is never touched. `available()` says why it cannot run (not root, no
// PostgreSQL binaries), so a suite can skip with one line.
import { execFile } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)
const BIN = process.env.CORRAL_TEST_PG_BIN ?? '/usr/lib/postgresql/15/bin'

export interface PgCluster { url: string; port: number; start(): Promise<void>; /** immediate = crash-like stop */ stop(mode?: 'fast' | 'immediate'): Promise<void>; destroy(): Promise<void> }

export async function pgClusterUnavailable(): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return 'not running as root (runuser -u postgres is needed)'
  if (!existsSync(join(BIN, 'initdb'))) return `no PostgreSQL binaries in ${BIN}`
  try {
    await run('id', ['-u', 'postgres'])
  } catch {
    return 'no postgres user'
  }
  return undefined
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port
      s.close(() => resolve(port))
    })
  })
}

const asPostgres = (cmd: string, args: string[]) => run('runuser', ['-u', 'postgres', '--', join(BIN, cmd), ...args], { timeout: 60_000 })

export async function startPgCluster(): Promise<PgCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-pg-'))
  const { stdout } = await run('id', ['-u', 'postgres'])
  const uid = Number(stdout.trim())
  chownSync(dir, uid, uid)
  const data = join(dir, 'data')
  await asPostgres('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync'])
  const port = await freePort()
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60`
  const cluster: PgCluster = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    async start() {
      await asPostgres('pg_ctl', ['-D', data, '-o', opts, '-l', join(dir, 'log'), '-w', '-t', '30', 'start'])
    },
    async stop(mode = 'fast') {
      await asPostgres('pg_ctl', ['-D', data, '-m', mode, '-w', '-t', '30', 'stop'])
    },
    async destroy() {
      await cluster.stop('immediate').catch(() => {})
      rmSync(dir, { recursive: true, force: true })
    },
  }
  await cluster.start()
  return cluster
}
