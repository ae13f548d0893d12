import type { Kysely } from 'kysely'
import type { StoreDialect } from '../dialects/types.js'
import type { Database } from '../schema.js'

/** What every repository factory receives: the (possibly transactional) Kysely handle and the dialect. */
export interface RepoContext {
  readonly db: Kysely<Database>
  readonly dialect: StoreDialect
}

/** Drops nulls so optional columns are absent, as the API records expect. */
export function compact<T extends object>(row: T): { [K in keyof T]: Exclude<T[K], null> } {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(row)) if (v !== null && v !== undefined) out[k] = v
  return out as { [K in keyof T]: Exclude<T[K], null> }
}
