// Packs (spec "Pack"): content bundles an org uploads or clones, visible to its own org or, with
// visibility `community`, to every org. `manifest` is the parsed pack.yaml as JSON text (the agent
// command and agent event schemas live there); `size_bytes` is bigint because a pack may pass 2 GiB.
import type { StoreMigration } from './types.js'

export const packs: StoreMigration = {
  name: '20261122T120000-packs',
  async up(db) {
    await db.schema
      .createTable('packs')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('name', 'text', (c) => c.notNull())
      .addColumn('display_name', 'text', (c) => c.notNull())
      .addColumn('description', 'text')
      .addColumn('version', 'text', (c) => c.notNull())
      .addColumn('tier', 'text', (c) => c.notNull())
      .addColumn('visibility', 'text', (c) => c.notNull())
      .addColumn('category', 'text')
      .addColumn('capabilities', 'text')
      .addColumn('suggested_packs', 'text')
      .addColumn('image_origin', 'text', (c) => c.notNull())
      .addColumn('image_ref', 'text')
      .addColumn('image_digest', 'text')
      .addColumn('size_bytes', 'bigint')
      .addColumn('manifest', 'text', (c) => c.notNull())
      .addColumn('created_by', 'text')
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .execute()
    // Deleted packs are gone (hard delete), so "unique among non-deleted" is a plain unique index.
    await db.schema.createIndex('packs_org_name_idx').on('packs').columns(['org_id', 'name']).unique().execute()
    await db.schema.createIndex('packs_visibility_idx').on('packs').columns(['visibility', 'name']).execute()
    // Content trees are shared by digest; delete asks whether any row still references one.
    await db.schema.createIndex('packs_digest_idx').on('packs').column('image_digest').execute()
  },
}
