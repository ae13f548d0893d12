// Spawns the built `corral dev` (bin/run.js → dist/) on free ports and waits for its summary.
// Shared by the dev and README-tour e2e suites. Run `npm run build` first.
import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { CORRAL_BIN, hermeticEnv } from './serve.js'

export interface RunningDev { url: string; adminKey: string; child: ChildProcess; output(): string; stop(): Promise<number | null> }

/**
 * Spawns `corral dev` and waits for its summary; the admin key is read from the data dir. `port`:
 * the API's (0, the default, is a free one; a fixed one when the URL must be known beforehand, e.g.
 * as the public URL an OAuth provider redirects to).
 */
export async function startDev(dataDir: string, env: Record<string, string>, args: string[] = [], port = 0): Promise<RunningDev> {
  // With a fixed API port the proxy and the fake model still take free ones.
  const ports = ['--port', String(port), ...(port === 0 ? [] : ['--proxy-port', '0', '--model-port', '0'])]
  const child = spawn(process.execPath, [CORRAL_BIN, 'dev', '--data-dir', dataDir, ...ports, '--allow-unenforced-limits', ...args], {
    env: { ...hermeticEnv(), NO_COLOR: '1', CORRAL_LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout!.on('data', (c) => (out += String(c)))
  child.stderr!.on('data', (c) => (out += String(c)))
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`corral dev was not ready in 30 s:\n${out}`))
    }, 30_000)
    const check = () => {
      const m = /^corral ready: api (http:\/\/\S+?)\/v1\b/m.exec(out)
      if (m && out.includes('corral dev is running')) {
        clearTimeout(timer)
        resolve(m[1]!)
      }
    }
    child.stdout!.on('data', check)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`corral dev exited with ${code} before it was ready:\n${out}`))
    })
  })
  return {
    url,
    adminKey: readFileSync(join(dataDir, 'admin.key'), 'utf8').trim(),
    child,
    output: () => out,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      return exited
    },
  }
}

