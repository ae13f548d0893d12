// A real OCI registry for tests: Debian's `docker-registry` (distribution 2.8) serving a temp
// directory on a loopback port. The registry cannot listen on port 0, so a free port is picked
// first (and the start retried on a clash). Suites skip when the binary is absent — unless
// CORRAL_TEST_REQUIRE_REGISTRY=1 (set by .ci/run), where a missing registry fails them.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export const REGISTRY_BIN = 'docker-registry'

/** Whether registry suites run here; throws under CORRAL_TEST_REQUIRE_REGISTRY=1 when they cannot. */
export function registryAvailable(): boolean {
  const ok = spawnSync(REGISTRY_BIN, ['--version'], { stdio: 'ignore' }).status === 0
  if (!ok && process.env.CORRAL_TEST_REQUIRE_REGISTRY === '1') {
    throw new Error(`${REGISTRY_BIN} is required (CORRAL_TEST_REQUIRE_REGISTRY=1) but not installed: apt-get install docker-registry`)
  }
  if (!ok) console.log(`${REGISTRY_BIN} not installed, skipping registry suites`)
  return ok
}

export interface TestRegistry {
  /** `127.0.0.1:<port>` */
  host: string
  stop(): Promise<void>
}

export interface RegistryOptions {
  /** An htpasswd line (`user:<bcrypt hash>`): the registry then demands Basic auth. */
  htpasswd?: string
}

export async function startRegistry(opts: RegistryOptions = {}): Promise<TestRegistry> {
  for (let attempt = 0; ; attempt++) {
    const port = await freePort()
    const dir = mkdtempSync(join(tmpdir(), 'corral-registry-'))
    const config = join(dir, 'config.yml')
    if (opts.htpasswd) writeFileSync(join(dir, 'htpasswd'), `${opts.htpasswd}\n`)
    writeFileSync(config, [
      'version: 0.1',
      'log:', '  level: error', '  accesslog:', '    disabled: true',
      'storage:', `  filesystem:`, `    rootdirectory: ${join(dir, 'data')}`, '  delete:', '    enabled: true',
      'http:', `  addr: 127.0.0.1:${port}`,
      ...(opts.htpasswd ? ['auth:', '  htpasswd:', '    realm: corral-test', `    path: ${join(dir, 'htpasswd')}`] : []),
    ].join('\n'))
    const child = spawn(REGISTRY_BIN, ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()))
    const host = `127.0.0.1:${port}`
    const stop = async () => {
      await kill(child)
      rmSync(dir, { recursive: true, force: true })
    }
    if (await ready(host, child)) return { host, stop }
    await stop()
    if (attempt >= 2) throw new Error(`${REGISTRY_BIN} did not start on ${host}: ${stderr.slice(-500)}`)
  }
}

async function ready(host: string, child: ChildProcess): Promise<boolean> {
  const deadline = Date.now() + 10_000
  while (Date.now() < deadline) {
    if (child.exitCode !== null) return false
    try {
      const res = await fetch(`http://${host}/v2/`)
      if (res.status === 200 || res.status === 401) return true
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50))
  }
  return false
}

function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
  })
}

/** A port free at the time of asking (bound to port 0, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number }
      srv.close(() => resolve(port))
    })
  })
}
