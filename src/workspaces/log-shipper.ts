// The agent's own output (its stdout and stderr, which the local and process drivers append to a
// file of the workspace on this host, and the Kubernetes driver streams from the agent container's
// log: AgentProcess.output) copied into the database while the agent runs, so that any
// replica serves `GET /v1/workspaces/{id}/logs` (docs/workspaces.md "Agent output"). Bounded on
// every side: a chunk is at most CHUNK_BYTES, one pass reads at most PASS_BYTES, a backlog larger
// than the retention cap is skipped over with a marker line, and the store keeps the newest
// RETENTION_BYTES per workspace. Capability tokens (JWTs) are redacted before anything is stored:
// an agent that prints its environment must not hand its token to every reader of its logs.
import { open, stat } from 'node:fs/promises'
import { isAbsolute } from 'node:path'
import { StringDecoder } from 'node:string_decoder'
import type { Logger } from 'pino'
import type { AgentProcess } from '../runtime/index.js'
import type { WorkspaceLogs } from '../store/index.js'

/** The newest agent output kept per workspace (older chunks are trimmed). */
export const LOG_RETENTION_BYTES = 4 * 1024 * 1024
const CHUNK_BYTES = 64 * 1024
const PASS_BYTES = 256 * 1024
const INTERVAL_MS = 250
const JWT = /eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]+/g

export interface ShipperOptions {
  logs: WorkspaceLogs
  logger?: Logger
  intervalMs?: number
}

/** The size of the agent's log file now (0 when absent): where the next agent's output starts. */
export async function logOffset(logPath: string): Promise<number> {
  if (!isAbsolute(logPath)) return 0
  return stat(logPath).then((s) => s.size, () => 0)
}

/** Text safe to store: capability tokens (and the exact launch token) replaced by `[redacted]`. */
export function redactTokens(text: string, token?: string): string {
  const out = token ? text.split(token).join('[redacted]') : text
  return out.replace(JWT, '[redacted]')
}

/**
 * Copies what the agent appends to `proc.logPath` after `from` into the store until the agent
 * exits (then one last pass); or, for drivers whose output is not a host file (Kubernetes pods),
 * what `proc.output` yields. Resolves when done; never rejects.
 */
export async function shipAgentLog(o: ShipperOptions, proc: AgentProcess, from: number, token?: string): Promise<void> {
  if (proc.output) return shipAgentOutput(o, proc.workspaceId, proc.output(), token)
  if (!isAbsolute(proc.logPath)) return
  let offset = from
  let carry = ''
  const decoder = new StringDecoder('utf8')
  let exited = false
  void proc.exited.finally(() => { exited = true })
  const flush = async (text: string): Promise<void> => {
    // Redacted before it is cut into chunks: a token across a chunk boundary must not escape.
    const safe = redactTokens(text, token)
    for (let i = 0; i < safe.length; i += CHUNK_BYTES) await o.logs.append(proc.workspaceId, safe.slice(i, i + CHUNK_BYTES), LOG_RETENTION_BYTES)
  }
  const pass = async (last: boolean): Promise<void> => {
    const size = await stat(proc.logPath).then((s) => s.size, () => offset)
    if (size < offset) offset = 0 // truncated or replaced: start over
    let skipped = ''
    if (size - offset > LOG_RETENTION_BYTES) {
      skipped = `[corral: ${size - LOG_RETENTION_BYTES - offset} bytes of agent output skipped]\n`
      offset = size - LOG_RETENTION_BYTES
      carry = ''
    }
    const length = Math.min(size - offset, PASS_BYTES)
    let read = ''
    if (length > 0) {
      const fh = await open(proc.logPath, 'r')
      try {
        const buf = Buffer.alloc(length)
        const { bytesRead } = await fh.read(buf, 0, length, offset)
        offset += bytesRead
        read = decoder.write(buf.subarray(0, bytesRead))
      } finally {
        await fh.close()
      }
    }
    // Whole lines only (a token split across two chunks would escape redaction), unless the line is
    // longer than a chunk or the agent is gone.
    const text = carry + read
    const cut = last ? text.length : text.lastIndexOf('\n') + 1
    const ready = cut > 0 ? text.slice(0, cut) : text.length >= CHUNK_BYTES ? text : ''
    carry = text.slice(ready.length)
    if (skipped || ready) await flush(skipped + ready)
  }
  // Bounded: the loop ends when the agent exits; the last passes drain at most the retention cap.
  while (!exited) {
    await new Promise((r) => setTimeout(r, o.intervalMs ?? INTERVAL_MS).unref())
    await pass(false).catch((err: unknown) => o.logger?.warn({ err, workspace_id: proc.workspaceId }, 'agent output not stored (will retry)'))
  }
  for (let i = 0; i < LOG_RETENTION_BYTES / PASS_BYTES + 1; i++) {
    const before = offset
    const ok = await pass(true).then(() => true, (err: unknown) => {
      o.logger?.warn({ err, workspace_id: proc.workspaceId }, 'agent output not stored')
      return false
    })
    if (!ok || offset === before) break
  }
}

/**
 * Copies the agent's output stream (whole lines) into the store, at most one write per interval:
 * what arrived meanwhile is redacted and stored together; a backlog over the retention cap keeps
 * its newest part with a marker line. Resolves when the stream ends; never rejects.
 */
async function shipAgentOutput(o: ShipperOptions, workspaceId: string, output: AsyncIterable<string>, token?: string): Promise<void> {
  let pending = ''
  let skipped = 0
  let ended = false
  const store = async (): Promise<void> => {
    if (!pending && !skipped) return
    const text = (skipped ? `[corral: ${skipped} bytes of agent output skipped]\n` : '') + redactTokens(pending, token)
    pending = ''
    skipped = 0
    for (let i = 0; i < text.length; i += CHUNK_BYTES) {
      try {
        await o.logs.append(workspaceId, text.slice(i, i + CHUNK_BYTES), LOG_RETENTION_BYTES)
      } catch (err) {
        pending = text.slice(i) + pending // kept for the next store (already redacted: redacting again changes nothing)
        throw err
      }
    }
  }
  const reading = (async () => {
    try {
      for await (const text of output) {
        pending += text
        if (pending.length > LOG_RETENTION_BYTES) {
          // Cut at a line start: a token is never split by the cut.
          const cut = pending.indexOf('\n', pending.length - LOG_RETENTION_BYTES) + 1 || pending.length - LOG_RETENTION_BYTES
          skipped += cut
          pending = pending.slice(cut)
        }
      }
    } catch (err) {
      o.logger?.warn({ err, workspace_id: workspaceId }, 'agent output no longer followed')
    } finally {
      ended = true
    }
  })()
  // Bounded: the loop ends with the stream (which ends with the agent); the last store drains it.
  while (!ended) {
    await Promise.race([reading, new Promise((r) => setTimeout(r, o.intervalMs ?? INTERVAL_MS).unref())])
    await store().catch((err: unknown) => o.logger?.warn({ err, workspace_id: workspaceId }, 'agent output not stored (will retry)'))
  }
  await store().catch((err: unknown) => o.logger?.warn({ err, workspace_id: workspaceId }, 'agent output not stored'))
}
