// Pod exec over WebSocket, the `channel.k8s.io` framing (v4 and v5): every binary message starts
// with its channel byte — 0 stdin, 1 stdout, 2 stderr, 3 the error channel (a meta/v1 Status as
// JSON when the command ends), 4 resize; v5 adds 255, "close this channel" ([255, 0] ends stdin).
import { spawn } from 'node:child_process'
import type { WebSocket } from 'ws'
import type { Kubelet } from './kubelet.js'
import { KubeError } from './store.js'

export function handleExec(ws: WebSocket, kubelet: Kubelet, namespace: string, pod: string, q: URLSearchParams): void {
  const frame = (channel: number, data: Buffer | string): void => {
    if (ws.readyState === ws.OPEN) ws.send(Buffer.concat([Buffer.from([channel]), Buffer.from(data)]))
  }
  const finish = (status: object): void => {
    frame(3, JSON.stringify(status))
    ws.close(1000)
  }
  let target: ReturnType<Kubelet['execTarget']>
  try {
    target = kubelet.execTarget(namespace, pod, q.get('container') ?? '')
  } catch (err) {
    const e = err instanceof KubeError ? err : new KubeError(500, 'InternalError', (err as Error).message)
    finish(e.body())
    return
  }
  const argv = q.getAll('command').map(target.map)
  if (argv.length === 0) return finish(new KubeError(400, 'BadRequest', 'you must specify at least 1 command').body())
  const child = spawn(argv[0]!, argv.slice(1), { cwd: target.cwd, env: target.env, stdio: [q.get('stdin') === 'true' ? 'pipe' : 'ignore', 'pipe', 'pipe'] })
  child.stdin?.on('error', () => {})
  child.stdout!.on('data', (d: Buffer) => frame(1, d))
  child.stderr!.on('data', (d: Buffer) => frame(2, d))
  ws.on('message', (data: Buffer) => {
    const channel = data[0]
    if (channel === 0) child.stdin?.write(data.subarray(1))
    else if (channel === 255 && data[1] === 0) child.stdin?.end()
  })
  // v4 has no close frame: the client closing the socket ends stdin.
  ws.on('close', () => {
    child.stdin?.end()
  })
  child.once('error', (err) => finish({ metadata: {}, status: 'Failure', message: `exec failed: ${err.message}`, reason: 'InternalError', code: 500 }))
  child.once('close', (code, signal) => {
    const exit = code ?? 128 + (signal === 'SIGKILL' ? 9 : 15)
    if (exit === 0) return finish({ metadata: {}, status: 'Success' })
    finish({
      metadata: {}, status: 'Failure', reason: 'NonZeroExitCode',
      message: `command terminated with non-zero exit code: error executing command [${argv.join(' ')}], exit code ${exit}`,
      details: { causes: [{ reason: 'ExitCode', message: String(exit) }] },
    })
  })
}
