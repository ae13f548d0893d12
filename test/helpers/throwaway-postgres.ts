// A PostgreSQL cluster of the test's own: initdb into a temp dir, started on a free port with its
// socket in that dir, so a test may stop, restart or crash it without touching the machine's
// shared cluster (127.0.0.1:5432, used by everyone else). Built for the "database goes away"
// suites (API 503 and recovery, proxy fail-closed, chaos); each call is a new cluster (~1–2 s).
//
//   const pg = await startThrowawayPostgres()
//   … startServe({ db: pg.url }) …
//   await pg.stop()            // fast shutdown: clients are disconnected
//   await pg.start()           // same data, same port
//   await pg.restart({ mode: 'immediate' })   // crash-like: no checkpoint
//   await pg.destroy()         // in afterAll; also done at process exit
//
// Binaries: CORRAL_TEST_PG_BIN, else the newest /usr/lib/postgresql/<v>/bin. When this process
// runs as root, every PostgreSQL binary runs as the `postgres` user (`runuser`), which the server
// insists on. Fsync is off: these clusters hold nothing worth keeping.
import { execFile, spawnSync } from 'node:child_process'
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { describe } from 'vitest'

const run = promisify(execFile)

export type PgStopMode = 'smart' | 'fast' | 'immediate'

export interface ThrowawayPostgres {
  /** `postgres://postgres:postgres@127.0.0.1:<port>/postgres` (trust auth; any password works). */
  readonly url: string
  readonly port: number
  /** The cluster's data directory (also holds its socket and `server.log`). */
  readonly dir: string
  /** URL of another database on this cluster (create it first with `createDatabase`). */
  urlFor(database: string): string
  createDatabase(name: string): Promise<string>
  /** Starts a stopped cluster on the same port and data; resolves once it accepts connections. */
  start(): Promise<void>
  /** Stops it (default `fast`: open connections are terminated); resolves once it is down. */
  stop(opts?: { mode?: PgStopMode }): Promise<void>
  restart(opts?: { mode?: PgStopMode }): Promise<void>
  /** The postmaster's pid while running (e.g. to SIGSTOP it for a stall). */
  pid(): number | undefined
  running(): boolean
  /** Stops it at once and removes the data dir. Idempotent. */
  destroy(): Promise<void>
}

/** The directory holding initdb/pg_ctl, or undefined when PostgreSQL is not installed here. */
export function postgresBinDir(): string | undefined {
  const explicit = process.env.CORRAL_TEST_PG_BIN
  if (explicit) return existsSync(join(explicit, 'pg_ctl')) ? explicit : undefined
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return undefined
  const versions = readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a))
  for (const v of versions) if (existsSync(join(root, v, 'bin', 'pg_ctl'))) return join(root, v, 'bin')
  return undefined
}

export function throwawayPostgresAvailable(): boolean {
  return postgresBinDir() !== undefined
}

/**
 * A suite that starts its own clusters. Declared always; skipped with one line when this machine
 * has no PostgreSQL binaries — unless CORRAL_TEST_PG_URL is set (CI), where PostgreSQL is
 * installed and a missing binary is a failure, not a skip.
 */
export function describeThrowawayPostgres(name: string, fn: () => void): void {
  if (throwawayPostgresAvailable() || process.env.CORRAL_TEST_PG_URL) {
    describe(name, fn)
    return
  }
  console.warn(`${name}: no PostgreSQL binaries on this machine; skipped (set CORRAL_TEST_PG_BIN)`)
  describe.skip(name, () => {})
}

const live = new Set<{ kill(): void }>()
let exitHookInstalled = false

export async function startThrowawayPostgres(): Promise<ThrowawayPostgres> {
  const bin = postgresBinDir()
  if (!bin) throw new Error('startThrowawayPostgres: no PostgreSQL binaries (install postgresql, or set CORRAL_TEST_PG_BIN)')
  const asRoot = process.getuid?.() === 0
  const dir = mkdtempSync(join(tmpdir(), 'corral-pg-'))
  if (asRoot) chownSync(dir, Number(idOf('-u')), Number(idOf('-g')))
  const pg = (tool: string, args: string[]) => (asRoot ? run('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args]) : run(join(bin, tool), args))
  const pgSync = (tool: string, args: string[]) =>
    asRoot ? spawnSync('runuser', ['-u', 'postgres', '--', join(bin, tool), ...args]) : spawnSync(join(bin, tool), args)

  const data = join(dir, 'data')
  await pg('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--no-sync', '--no-instructions'])

  let port = 0
  let up = false
  const log = join(dir, 'server.log')
  const startOn = async (p: number) => {
    const opts = `-p ${p} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c synchronous_commit=off -c max_connections=100`
    await pg('pg_ctl', ['-D', data, '-l', log, '-o', opts, '-w', '-t', '30', 'start'])
    up = true
  }
  // A free port can be taken between our probe and the server's bind; try a few.
  for (let attempt = 0; ; attempt++) {
    port = await freePort()
    try {
      await startOn(port)
      break
    } catch (err) {
      if (attempt >= 4) throw new Error(`throwaway PostgreSQL did not start: ${String(err)}\n${readLog(log)}`)
    }
  }
  const guard = { kill: () => void (up && pgSync('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop'])) }
  live.add(guard)
  if (!exitHookInstalled) {
    exitHookInstalled = true
    process.once('exit', () => {
      for (const g of live) g.kill()
    })
  }

  const urlFor = (database: string) => `postgres://postgres:postgres@127.0.0.1:${port}/${database}`
  const self: ThrowawayPostgres = {
    url: urlFor('postgres'),
    port,
    dir,
    urlFor,
    async createDatabase(name) {
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`createDatabase: unsafe name ${name}`)
      await pg('psql', ['-h', dir, '-p', String(port), '-U', 'postgres', '-qc', `CREATE DATABASE ${name}`])
      return urlFor(name)
    },
    async start() {
      if (up) return
      try {
        await startOn(port)
      } catch (err) {
        throw new Error(`throwaway PostgreSQL did not restart on ${port}: ${String(err)}\n${readLog(log)}`)
      }
    },
    async stop(o = {}) {
      if (!up) return
      await pg('pg_ctl', ['-D', data, '-m', o.mode ?? 'fast', '-w', '-t', '30', 'stop'])
      up = false
    },
    async restart(o = {}) {
      await self.stop(o)
      await self.start()
    },
    pid() {
      if (!up) return undefined
      const first = readLog(join(data, 'postmaster.pid')).split('\n')[0]
      return first ? Number(first) : undefined
    },
    running: () => up,
    async destroy() {
      live.delete(guard)
      if (up) await self.stop({ mode: 'immediate' }).catch(() => guard.kill())
      up = false
      rmSync(dir, { recursive: true, force: true })
    },
  }
  return self
}

function idOf(flag: '-u' | '-g'): string {
  return spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim()
}

function readLog(path: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return ''
  }
}

/**
 * A free port below the kernel's ephemeral range, so that while the cluster is stopped (restart
 * tests) neither an outgoing connection's local port nor another test's `listen(0)` can take it:
 * both draw from the ephemeral range. Falls back to an ephemeral port when there is no room below.
 */
async function freePort(): Promise<number> {
  const low = ephemeralLow()
  if (low > 12_000) {
    for (let i = 0; i < 20; i++) {
      const p = 10_000 + Math.floor(Math.random() * (low - 10_000))
      if (await bindable(p)) return p
    }
  }
  return listenPort(0)
}

function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0])
    return Number.isInteger(low) ? low : 0
  } catch {
    return 0
  }
}

function bindable(port: number): Promise<boolean> {
  return listenPort(port).then(() => true, () => false)
}

function listenPort(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(port, '127.0.0.1', () => {
      const { port: got } = srv.address() as AddressInfo
      srv.close(() => resolve(got))
    })
  })
}
