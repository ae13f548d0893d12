// Extends the proxy's minimal providers and agent_roles tables (20261122T103000-proxy) with the
// rest of the spec's fields, so the proxy's activation queries keep working unchanged. One
// ADD COLUMN per statement: SQLite's ALTER TABLE takes one column at a time.
import type { StoreMigration } from './types.js'

export const roles: StoreMigration = {
  name: '20261122T110000-roles',
  async up(db) {
    for (const [name, type] of [
      ['description', 'text'],
      ['base_url', 'text'],
      ['default_model', 'text'],
    ] as const) {
      await db.schema.alterTable('providers').addColumn(name, type).execute()
    }

    for (const [name, type] of [
      ['display_name', 'text'],
      ['description', 'text'],
      ['environment_description', 'text'],
      ['task_timeout_seconds', 'integer'],
      ['idle_timeout_seconds', 'integer'],
      ['thinking_effort', 'text'],
      ['max_continuations', 'integer'],
      ['max_context_tokens', 'integer'],
      ['pool_size', 'integer'],
      ['pool_max_size', 'integer'],
      // JSON array of pack ids as text (tiny, read whole, never queried inside).
      ['pack_ids', 'text'],
    ] as const) {
      await db.schema.alterTable('agent_roles').addColumn(name, type).execute()
    }
    await db.schema.alterTable('agent_roles').addColumn('pool_policy', 'text', (c) => c.notNull().defaultTo('')).execute()

    // Provider archive cascades and delete guards look roles up by provider.
    await db.schema.createIndex('agent_roles_provider_idx').on('agent_roles').columns(['org_id', 'provider_id']).execute()
  },
}
