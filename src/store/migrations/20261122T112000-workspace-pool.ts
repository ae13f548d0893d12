// Warm pools: a workspace provisioned ahead for a role (`pooled` = 1) until a task claims it.
import type { StoreMigration } from './types.js'

export const workspacePool: StoreMigration = {
  name: '20261122T112000-workspace-pool',
  async up(db) {
    await db.schema.alterTable('workspaces').addColumn('pooled', 'integer', (c) => c.notNull().defaultTo(0)).execute()
    await db.schema.createIndex('workspaces_pool_idx').on('workspaces').columns(['role_id', 'pooled', 'state']).execute()
  },
}
