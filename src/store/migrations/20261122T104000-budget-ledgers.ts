// Budget ledgers of the proxy: one row per (workspace, scope, capability, counter). `used`
// includes amounts leased to proxy processes and not yet returned (docs/proxy.md, "Budgets").
import type { StoreMigration } from './types.js'

export const budgetLedgers: StoreMigration = {
  name: '20261122T104000-budget-ledgers',
  async up(db) {
    await db.schema
      .createTable('budget_ledgers')
      .addColumn('key', 'text', (c) => c.primaryKey())
      .addColumn('org_id', 'text', (c) => c.notNull())
      .addColumn('workspace_id', 'text', (c) => c.notNull())
      .addColumn('used', 'bigint', (c) => c.notNull().defaultTo(0))
      // Start of the current ttl window, epoch milliseconds (0 for counters that never reset).
      .addColumn('window_start', 'bigint', (c) => c.notNull().defaultTo(0))
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute()
    await db.schema.createIndex('budget_ledgers_ws_idx').on('budget_ledgers').column('workspace_id').execute()
  },
}
