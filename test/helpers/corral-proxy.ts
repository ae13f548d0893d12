// `corral proxy` as an operator runs it (the built binary: `npm run build` first): spawned with a
// data dir, a database and the test's upstream CA on a free port, ready once it prints
// `corral proxy ready: <url>`. Shared by the suites that start standalone proxies
// (test/e2e/proxy-workers, test/e2e/replicas-proxy).
import { spawn, type ChildProcess } from 'node:child_process'
import { CORRAL_BIN, hermeticEnv } from './serve.js'

export interface CorralProxy {
  child: ChildProcess
  /** The proxy's URL from its ready line, e.g. http://127.0.0.1:41235 */
  url: string
  /** Everything the process wrote so far (stdout and stderr). */
  out: () => string
  exited: Promise<number | null>
}

export interface CorralProxyOptions {
  /** `--workers` */
  workers: number
  dataDir: string
  /** `--db` */
  db: string
  /** `--upstream-ca`: a PEM file the proxy trusts for upstreams. */
  upstreamCa: string
  /** Added to the hermetic environment (CORRAL_LOG_LEVEL=warn, NO_COLOR=1). */
  env?: Record<string, string>
  /** How long the ready line may take (default 30 s). */
  readyTimeoutMs?: number
  /** Every child started is pushed here, so a failed test can leave no process behind. */
  started?: ChildProcess[]
}

/** Starts `corral proxy` and resolves once it is ready; rejects with its output when it exits or times out first. */
export function startCorralProxy(o: CorralProxyOptions): Promise<CorralProxy> {
  const child = spawn(process.execPath, [CORRAL_BIN, 'proxy', '--workers', String(o.workers), '--data-dir', o.dataDir, '--db', o.db, '--port', '0', '--upstream-ca', o.upstreamCa], {
    env: { ...hermeticEnv(), CORRAL_LOG_LEVEL: 'warn', NO_COLOR: '1', ...o.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  o.started?.push(child)
  let out = ''
  child.stdout!.on('data', (c) => (out += String(c)))
  child.stderr!.on('data', (c) => (out += String(c)))
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`corral proxy not ready:\n${out}`)), o.readyTimeoutMs ?? 30_000)
    child.stdout!.on('data', () => {
      const m = /^corral proxy ready: (http:\/\/\S+)/m.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve({ child, url: m[1]!, out: () => out, exited })
      }
    })
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`corral proxy exited ${code}:\n${out}`))
    })
  })
}
