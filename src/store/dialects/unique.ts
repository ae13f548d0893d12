// Whether an error is a unique-index violation, in either dialect's words: routes and services
// that pre-check a name still meet the index when a concurrent create wins, and answer the same
// `conflict` as the pre-check. Both dialects' vocabularies live here, nowhere else.

/**
 * true when `err` is a unique constraint violation, a primary key's included (Postgres 23505 for
 * both; SQLite SQLITE_CONSTRAINT_UNIQUE, SQLITE_CONSTRAINT_PRIMARYKEY).
 */
export function isUniqueViolation(err: unknown): boolean {
  const code = (err as { code?: string } | null | undefined)?.code
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY'
}
