import type { Kysely } from 'kysely'
import type { DialectName } from '../dialects/types.js'

/**
 * One schema change. `name` starts with a UTC timestamp (YYYYMMDDTHHMMSS) so the order is the
 * same everywhere; `up` gets the dialect for the few statements that differ (JSON type, triggers).
 */
export interface StoreMigration {
  readonly name: string
  // any: migrations run against the schema as it was, not today's types
  up(db: Kysely<any>, dialect: DialectName): Promise<void>
}
