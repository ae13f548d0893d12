// Personal credentials: a credential row may belong to one member of the org
// (`owner_user_id`), or to the org as a whole (`owner_user_id` NULL). Names are unique among the
// org's credentials and, separately, among each member's personal ones, so a member's personal
// `github` can stand beside the org's `github` (the proxy's choice rule, docs/credentials.md
// "Which credential a transform uses") and every member can hold their own.
//
// The old table-level UNIQUE (org_id, name) has to go. Postgres drops the constraint. SQLite cannot
// drop a table constraint, so the table is rebuilt the way SQLite documents (create new, copy,
// drop, rename) from its own stored CREATE statement minus that one constraint, which keeps every
// column another migration may have added before this one, and its indexes and triggers are
// recreated from their stored SQL. Foreign keys are switched off around the rebuild (a pragma that
// is a no-op inside a transaction; SQLite migrations run outside one) so dropping the old table
// cascades into nothing, then checked and switched back on.
import { sql, type Kysely } from 'kysely'
import type { StoreMigration } from './types.js'

const OLD_UNIQUE = /,\s*constraint\s+"credentials_org_name_uq"\s+unique\s*\(\s*"org_id"\s*,\s*"name"\s*\)/i

export const credentialOwner: StoreMigration = {
  name: '20261126T071000-creds-credential-owner',
  async up(db, dialect) {
    if (dialect === 'postgres') await sql`ALTER TABLE credentials DROP CONSTRAINT credentials_org_name_uq`.execute(db)
    else await rebuildSqliteWithoutOrgNameUnique(db)
    await db.schema.alterTable('credentials').addColumn('owner_user_id', 'text').execute()
    await db.schema.createIndex('credentials_org_name_uq').on('credentials').columns(['org_id', 'name']).unique()
      .where(sql.ref('owner_user_id'), 'is', null).execute()
    await db.schema.createIndex('credentials_owner_name_uq').on('credentials').columns(['org_id', 'owner_user_id', 'name']).unique()
      .where(sql.ref('owner_user_id'), 'is not', null).execute()
  },
}

async function rebuildSqliteWithoutOrgNameUnique(db: Kysely<any>): Promise<void> {
  const table = await sql<{ sql: string }>`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'credentials'`.execute(db)
  const create = table.rows[0]?.sql
  if (!create || !OLD_UNIQUE.test(create)) throw new Error('credentials: the (org_id, name) unique constraint was not found where expected')
  const rebuilt = create.replace(OLD_UNIQUE, '').replace(/^create\s+table\s+"?credentials"?/i, 'CREATE TABLE "credentials_rebuild"')
  const extras = await sql<{ sql: string }>`SELECT sql FROM sqlite_master WHERE tbl_name = 'credentials' AND type IN ('index', 'trigger') AND sql IS NOT NULL`.execute(db)
  await sql`PRAGMA foreign_keys = OFF`.execute(db)
  try {
    await db.transaction().execute(async (trx) => {
      await sql.raw(rebuilt).execute(trx)
      await sql`INSERT INTO credentials_rebuild SELECT * FROM credentials`.execute(trx)
      await sql`DROP TABLE credentials`.execute(trx)
      await sql`ALTER TABLE credentials_rebuild RENAME TO credentials`.execute(trx)
      for (const x of extras.rows) await sql.raw(x.sql).execute(trx)
      const broken = await sql`PRAGMA foreign_key_check`.execute(trx)
      if (broken.rows.length > 0) throw new Error('credentials rebuild left foreign keys broken')
    })
  } finally {
    await sql`PRAGMA foreign_keys = ON`.execute(db)
  }
}
