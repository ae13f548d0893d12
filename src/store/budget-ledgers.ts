// Atomic ledger operations for proxy budgets, on both dialects: a read-modify-write inside one
// transaction, with a row lock on Postgres (SQLite serialises writers). Windows: a counter with a
// ttl resets when its window (started at the first debit) is older than the ttl.
import type { Kysely, Transaction } from 'kysely'
import type { DialectCapabilities } from './dialects/types.js'
import { nowIso } from '../contract/index.js'

interface BudgetLedgersTable { key: string; org_id: string; workspace_id: string; used: number | string | bigint; window_start: number | string | bigint; updated_at: string }
interface Db { budget_ledgers: BudgetLedgersTable }

export interface LedgerKey { key: string; orgId: string; workspaceId: string; ttlMs?: number }
export interface LedgerSnapshot { used: number; windowStart: number }

/** Over a store (its Kysely handle and whether the dialect locks rows); the ledgers run their own transactions. */
export function budgetLedgers(store: { readonly db: Kysely<any>; readonly capabilities: Pick<DialectCapabilities, 'rowLocks'> }) {
  const db = store.db as unknown as Kysely<Db>
  const locks = store.capabilities.rowLocks

  async function current(trx: Transaction<Db>, k: LedgerKey, now: number): Promise<LedgerSnapshot> {
    await trx.insertInto('budget_ledgers')
      .values({ key: k.key, org_id: k.orgId, workspace_id: k.workspaceId, used: 0, window_start: k.ttlMs ? now : 0, updated_at: nowIso() })
      .onConflict((oc) => oc.column('key').doNothing())
      .execute()
    let q = trx.selectFrom('budget_ledgers').select(['used', 'window_start']).where('key', '=', k.key)
    if (locks) q = q.forUpdate()
    const row = await q.executeTakeFirstOrThrow()
    const snap = { used: Number(row.used), windowStart: Number(row.window_start) }
    if (k.ttlMs && now - snap.windowStart >= k.ttlMs) return { used: 0, windowStart: now }
    return snap
  }

  async function write(trx: Transaction<Db>, k: LedgerKey, s: LedgerSnapshot): Promise<void> {
    await trx.updateTable('budget_ledgers').set({ used: s.used, window_start: s.windowStart, updated_at: nowIso() }).where('key', '=', k.key).execute()
  }

  return {
    /** Takes up to `want` from the remaining allowance (`max` 0 = unlimited); returns what was granted. */
    async acquire(k: LedgerKey, max: number, want: number, now = Date.now()): Promise<{ granted: number; snapshot: LedgerSnapshot }> {
      return db.transaction().execute(async (trx) => {
        const s = await current(trx, k, now)
        const granted = max > 0 ? Math.max(0, Math.min(want, max - s.used)) : want
        const next = { used: s.used + granted, windowStart: s.windowStart }
        await write(trx, k, next)
        return { granted, snapshot: next }
      })
    },
    /**
     * Applies signed adjustments in one transaction: positive = debits beyond a lease, negative =
     * unused lease returned. A return is only applied within the window it was leased in.
     */
    async adjust(items: readonly { k: LedgerKey; delta: number; leasedInWindow?: number }[], now = Date.now()): Promise<Map<string, LedgerSnapshot>> {
      return db.transaction().execute(async (trx) => {
        const out = new Map<string, LedgerSnapshot>()
        for (const { k, delta, leasedInWindow } of items) {
          const s = await current(trx, k, now)
          if (delta < 0 && leasedInWindow !== undefined && leasedInWindow !== s.windowStart) {
            out.set(k.key, s)
            continue
          }
          const next = { used: Math.max(0, s.used + delta), windowStart: s.windowStart }
          await write(trx, k, next)
          out.set(k.key, next)
        }
        return out
      })
    },
    async read(key: string): Promise<LedgerSnapshot | undefined> {
      const row = await db.selectFrom('budget_ledgers').select(['used', 'window_start']).where('key', '=', key).executeTakeFirst()
      return row ? { used: Number(row.used), windowStart: Number(row.window_start) } : undefined
    },
  }
}

export type BudgetLedgers = ReturnType<typeof budgetLedgers>
