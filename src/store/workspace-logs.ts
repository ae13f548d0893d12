// The agent output of workspaces (table `workspace_logs`, migration 20261126T103000-cli-workspace-logs):
// chunks of text numbered per workspace, appended by the replica that runs the agent and read by
// any replica. Retention is bounded per workspace: the oldest chunks are trimmed once the
// workspace holds more than `capBytes` (docs/workspaces.md "Agent output"). The trim reads every
// chunk of the workspace, so it runs only when the appends since the last one may have passed the
// cap by a quarter: amortised, a chatty agent's small chunks cost one insert each, not a scan.
import type { Kysely } from 'kysely'
import { nowIso } from '../contract/index.js'
import { isUniqueViolation } from './dialects/unique.js'

type Num = number | string | bigint
export interface WorkspaceLogsTable { workspace_id: string; seq: Num; at: string; text: string; bytes: number }
interface Db { workspace_logs: WorkspaceLogsTable }

export interface LogChunk {
  seq: number
  at: string
  text: string
}

export interface LogRead {
  /** Chunks after `after`, oldest first, at most `maxBytes` of text (at least one chunk when any). */
  chunks: LogChunk[]
  /** True when older chunks were trimmed by retention before the requested point. */
  truncated: boolean
}

export interface WorkspaceLogs {
  /** Appends one chunk; returns its seq. Trims the oldest chunks beyond `capBytes` for this workspace. */
  append(workspaceId: string, text: string, capBytes: number): Promise<number>
  read(workspaceId: string, opts: { after?: number; maxBytes: number }): Promise<LogRead>
}

export function workspaceLogs(store: { readonly db: Kysely<any> }): WorkspaceLogs {
  const db = store.db as unknown as Kysely<Db>

  async function insert(workspaceId: string, text: string): Promise<number> {
    const last = await db.selectFrom('workspace_logs').select((eb) => eb.fn.max('seq').as('seq')).where('workspace_id', '=', workspaceId).executeTakeFirst()
    const seq = Number(last?.seq ?? 0) + 1
    await db.insertInto('workspace_logs').values({ workspace_id: workspaceId, seq, at: nowIso(), text, bytes: Buffer.byteLength(text) }).execute()
    return seq
  }

  /** Trims to the cap; returns the bytes the workspace still holds. */
  async function trim(workspaceId: string, capBytes: number): Promise<number> {
    // Newest first, until the cap: everything older than the last chunk that fits goes.
    const rows = await db.selectFrom('workspace_logs').select(['seq', 'bytes']).where('workspace_id', '=', workspaceId).orderBy('seq', 'desc').execute()
    let total = 0
    const over = rows.find((r) => (total += r.bytes) > capBytes)
    if (!over) return total
    await db.deleteFrom('workspace_logs').where('workspace_id', '=', workspaceId).where('seq', '<=', Number(over.seq)).execute()
    return total - over.bytes
  }

  // An upper bound of what each workspace holds, as this writer knows it (unknown → trim at once,
  // which also covers a writer that took over from another replica). Bounded: entries are dropped
  // in insertion order beyond MAX_TRACKED; a dropped workspace is simply trimmed on its next append.
  const held = new Map<string, number>()
  const MAX_TRACKED = 10_000

  return {
    async append(workspaceId, text, capBytes) {
      let seq: number
      try {
        seq = await insert(workspaceId, text)
      } catch (err) {
        // One writer per workspace (its agent's replica); a takeover racing the last chunk of the old owner retries once.
        if (!isUniqueViolation(err)) throw err
        seq = await insert(workspaceId, text)
      }
      const bound = (held.get(workspaceId) ?? Infinity) + Buffer.byteLength(text)
      held.delete(workspaceId)
      held.set(workspaceId, bound > capBytes * 1.25 ? await trim(workspaceId, capBytes) : bound)
      if (held.size > MAX_TRACKED) held.delete(held.keys().next().value!)
      return seq
    },

    async read(workspaceId, { after = 0, maxBytes }) {
      const rows = await db.selectFrom('workspace_logs').select(['seq', 'at', 'text', 'bytes'])
        .where('workspace_id', '=', workspaceId).where('seq', '>', after).orderBy('seq', 'asc').limit(1000).execute()
      const chunks: LogChunk[] = []
      let total = 0
      for (const r of rows) {
        if (chunks.length > 0 && total + r.bytes > maxBytes) break
        total += r.bytes
        chunks.push({ seq: Number(r.seq), at: r.at, text: r.text })
      }
      const first = chunks[0]
      return { chunks, truncated: first !== undefined && first.seq > after + 1 }
    },
  }
}
