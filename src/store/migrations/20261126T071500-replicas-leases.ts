// Replicas: several `serve` processes on one database. Each replica has a row with a
// heartbeat; each live workspace (warm-pool members included) is owned by one replica through a
// lease row (owner + expiry, renewed by the owner's heartbeat); `max_concurrent` permits are held
// per holder with the same expiry, so a dead replica's permits come back (docs/workspaces.md
// "Replicas and leases", docs/proxy.md "Budgets").
import type { StoreMigration } from './types.js'

export const replicasLeases: StoreMigration = {
  name: '20261126T071500-replicas-leases',
  async up(db) {
    await db.schema
      .createTable('replicas')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('host', 'text', (c) => c.notNull())
      .addColumn('data_dir', 'text', (c) => c.notNull())
      .addColumn('api_url', 'text')
      .addColumn('proxy_url', 'text')
      .addColumn('started_at', 'text', (c) => c.notNull())
      // Epoch milliseconds: the last heartbeat, and until when the replica counts as alive.
      .addColumn('heartbeat_at', 'bigint', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .execute()
    await db.schema
      .createTable('workspace_leases')
      .addColumn('workspace_id', 'text', (c) => c.primaryKey().references('workspaces.id').onDelete('cascade'))
      .addColumn('owner', 'text', (c) => c.notNull())
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addColumn('acquired_at', 'text', (c) => c.notNull())
      .execute()
    await db.schema.createIndex('workspace_leases_owner_idx').on('workspace_leases').column('owner').execute()
    await db.schema.createIndex('workspace_leases_expiry_idx').on('workspace_leases').column('expires_at').execute()
    await db.schema
      .createTable('concurrency_permits')
      .addColumn('key', 'text', (c) => c.notNull())
      .addColumn('holder', 'text', (c) => c.notNull())
      .addColumn('count', 'integer', (c) => c.notNull().defaultTo(0))
      .addColumn('expires_at', 'bigint', (c) => c.notNull())
      .addPrimaryKeyConstraint('concurrency_permits_pk', ['key', 'holder'])
      .execute()
    await db.schema.createIndex('concurrency_permits_holder_idx').on('concurrency_permits').column('holder').execute()
  },
}
