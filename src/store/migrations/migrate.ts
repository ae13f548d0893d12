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
  let { error, results } = await migrator.migrateToLatest()
  // The Migrator looks for its tables across every schema of the database; a schema another store
  // drops during that scan fails it by name before anything is applied. The scan is safe to repeat.
  for (let attempt = 1; error && attempt < RACED_SCAN_ATTEMPTS && isOtherSchemaDropped(error, schema); attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 5 * attempt))
    ;({ error, results } = await migrator.migrateToLatest())
  }
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName
    throw new Error(`store migration ${failed ?? ''} failed: ${(error as Error).message ?? String(error)}`, { cause: error })
  }
}

const RACED_SCAN_ATTEMPTS = 20

/** Postgres `invalid_schema_name` naming a schema that is not this store's. */
function isOtherSchemaDropped(error: unknown, schema: string | undefined): boolean {
  const err = error as { code?: string; message?: string }
  if (err.code !== '3F000') return false
  return !(schema && err.message?.includes(`"${schema}"`))
}
