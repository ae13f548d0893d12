// Tables the outbound proxy reads: minimal providers, agent roles and workspaces (the workspace
// issue extends them; the proxy only needs what activation reads), and the org's encrypted
// secrets and credentials.
import type { StoreMigration } from './types.js'

export const proxy: StoreMigration = {
  name: '20261122T103000-proxy',
  async up(db) {
    await db.schema
      .createTable('providers')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('display_name', 'text')
      .addColumn('kind', 'text')
      .addColumn('domain', 'text')
      .addColumn('archived_at', 'text')
      .addColumn('created_by', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addUniqueConstraint('providers_org_name_uq', ['org_id', 'name'])
      .execute()

    await db.schema
      .createTable('agent_roles')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('provider_id', 'text', (c) => c.notNull().references('providers.id'))
      .addColumn('model', 'text')
      .addColumn('capabilities', 'text')
      .addColumn('environment', 'text', (c) => c.notNull().defaultTo('development'))
      .addColumn('archived_at', 'text')
      .addColumn('created_by', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addUniqueConstraint('agent_roles_org_name_uq', ['org_id', 'name'])
      .execute()

    await db.schema
      .createTable('workspaces')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('role_id', 'text', (c) => c.notNull().references('agent_roles.id'))
      .addColumn('state', 'text', (c) => c.notNull())
      .addColumn('environment', 'text')
      .addColumn('created_by_user_id', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute()
    await db.schema.createIndex('workspaces_org_idx').on('workspaces').columns(['org_id', 'created_at']).execute()

    // Encrypted at rest: `ciphertext` is AES-256-GCM (iv ‖ tag ‖ data, base64) bound to org and name.
    await db.schema
      .createTable('secrets')
      .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('ciphertext', 'text', (c) => c.notNull())
      .addColumn('created_by_user_id', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addPrimaryKeyConstraint('secrets_pk', ['org_id', 'name'])
      .execute()

    await db.schema
      .createTable('credentials')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('provider', 'text', (c) => c.notNull())
      .addColumn('kind', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('ciphertext', 'text', (c) => c.notNull())
      .addColumn('created_by_user_id', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addUniqueConstraint('credentials_org_name_uq', ['org_id', 'name'])
      .execute()
  },
}
