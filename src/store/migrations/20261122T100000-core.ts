// Organisations, users, memberships, API keys, settings and webhook nonces.
import type { StoreMigration } from './types.js'

export const core: StoreMigration = {
  name: '20261122T100000-core',
  async up(db) {
    await db.schema
      .createTable('orgs')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('name', 'text', (c) => c.notNull().unique())
      .addColumn('posture', 'text', (c) => c.notNull().defaultTo('active'))
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute()

    await db.schema
      .createTable('users')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('email', 'text', (c) => c.notNull().unique())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .execute()

    await db.schema
      .createTable('memberships')
      .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
      .addColumn('email', 'text', (c) => c.notNull())
      .addColumn('role', 'text', (c) => c.notNull())
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('invitation_id', 'text', (c) => c.notNull().unique())
      .addColumn('invited_by', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('accepted_at', 'text')
      .addColumn('first_seen_at', 'text')
      .addPrimaryKeyConstraint('memberships_pk', ['org_id', 'user_id'])
      .execute()
    await db.schema.createIndex('memberships_user_idx').on('memberships').column('user_id').execute()

    await db.schema
      .createTable('api_keys')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('label', 'text', (c) => c.notNull())
      .addColumn('prefix', 'text', (c) => c.notNull())
      .addColumn('permission_set', 'text', (c) => c.notNull())
      .addColumn('created_by_user_id', 'text')
      .addColumn('secret_hash', 'text', (c) => c.notNull().unique())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('last_used_at', 'text')
      .execute()
    await db.schema.createIndex('api_keys_org_idx').on('api_keys').columns(['org_id', 'created_at']).execute()

    await db.schema
      .createTable('settings')
      .addColumn('key', 'text', (c) => c.primaryKey())
      .addColumn('value', 'text', (c) => c.notNull())
      .execute()

    await db.schema
      .createTable('webhook_nonces')
      .addColumn('nonce', 'text', (c) => c.primaryKey())
      .addColumn('expires_at', 'text', (c) => c.notNull())
      .execute()
    await db.schema.createIndex('webhook_nonces_expiry_idx').on('webhook_nonces').column('expires_at').execute()
  },
}
