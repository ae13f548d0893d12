// Runs the migration list to latest with Kysely's Migrator. On Postgres the Migrator holds an
// advisory lock, so replicas starting together apply each migration exactly once; SQLite has a
// single writer and needs no lock.
import { Migrator, type Kysely, type Migration } from 'kysely'
import type { DialectName } from '../dialects/types.js'
import { migrations } from './index.js'

/** `schema`: the Postgres schema the store lives in, so the bookkeeping tables are looked up there too. */
export async function migrateToLatestOrThrow(db: Kysely<unknown>, dialect: DialectName, schema?: string): Promise<void> {
  const provider = {
    async getMigrations(): Promise<Record<string, Migration>> {
      return Object.fromEntries(
        migrations.map((m) => [m.name, { up: (d: Kysely<unknown>) => m.up(d as Kysely<any>, dialect) }]),
      )
    },
  }
  // Unordered: a migration appended by another part with an earlier timestamp still runs on stores
  // that already applied later ones.
  const migrator = new Migrator({ db, provider, allowUnorderedMigrations: true, ...(schema ? { migrationTableSchema: schema } : {}) })
  const { error, results } = await migrator.migrateToLatest()
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName
    throw new Error(`store migration ${failed ?? ''} failed: ${(error as Error).message ?? String(error)}`, { cause: error })
  }
}
