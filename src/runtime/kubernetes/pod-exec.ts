// Commands run in a workspace pod over the exec WebSocket (`v5.channel.k8s.io`, falling back to
// v4): tar streams /data out to a host file (snapshots) and a host file into /data (restores,
// uploads). The command's end comes on the error channel as a Status: Success, or a failure whose
// message (and exit code) is kept.
import { createReadStream, createWriteStream } from 'node:fs'
import { once } from 'node:events'
import { PassThrough, type Readable, type Writable } from 'node:stream'
import { RuntimeError } from '../errors.js'
import type { KubeClient } from './kube-client.js'

export interface ExecTarget {
  namespace: string
  pod: string
  container: string
}

/** Runs `command` with optional stdin, stdout to `stdout`; rejects unless the Status says Success. */
export async function execIn(client: KubeClient, target: ExecTarget, command: readonly string[], io: { stdin?: Readable; stdout?: Writable } = {}): Promise<void> {
  const stderr = new PassThrough()
  let errText = ''
  stderr.on('data', (d: Buffer) => {
    if (errText.length < 2000) errText += d.toString('utf8')
  })
  const stdout = io.stdout ?? new PassThrough().resume()
  let status: { status?: string; message?: string } | undefined
  const ws = await client.exec.exec(target.namespace, target.pod, target.container, [...command], stdout, stderr, io.stdin ?? null, false, (s) => {
    status = s
  })
  // 3 is CLOSED: the status arrived and the server closed the stream before we got here.
  const socket = ws as unknown as NodeJS.EventEmitter & { readyState: number }
  if (socket.readyState !== 3) await once(socket, 'close')
  if (status?.status !== 'Success') {
    const why = status?.message ?? 'the exec stream ended without a status'
    throw new RuntimeError('runtime_unavailable', `${command[0]} in pod ${target.pod} failed: ${why}${errText ? ` (${errText.trim().slice(0, 300)})` : ''}`)
  }
}

/** `tar` of /data into the host file `file` (pax, numeric owners: what readTarIndex lists). */
export async function archiveTo(client: KubeClient, target: ExecTarget, dir: string, file: string): Promise<void> {
  const out = createWriteStream(file, { mode: 0o600 })
  const done = once(out, 'finish')
  await execIn(client, target, ['tar', '--create', '--file', '-', '--format=posix', '--numeric-owner', '--ignore-failed-read', '--directory', dir, '.'], { stdout: out })
  if (!out.writableFinished) out.end()
  await done
}

/** Unpacks the host tar `file` into `dir` in the pod (owners not restored: the pod is not root). */
export async function extractFrom(client: KubeClient, target: ExecTarget, dir: string, file: string): Promise<void> {
  await execIn(client, target, ['tar', '--extract', '--file', '-', '--directory', dir, '--no-same-owner', '--preserve-permissions'], { stdin: createReadStream(file) })
}
