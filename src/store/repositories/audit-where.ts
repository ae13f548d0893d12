// The WHERE of every audit read (pages, stats, minTs): the org, the optional scope and time range,
// and the filter clauses of the grammar in src/contract.
import { sql, type Expression, type ExpressionBuilder, type SelectQueryBuilder, type SqlBool } from 'kysely'
import type { AuditFilterClause } from '../../contract/index.js'
import type { StoreDialect } from '../dialects/types.js'
import type { Database } from '../schema.js'

/** Restrictions shared by pages and stats (all optional except the org, which is a parameter). */
export interface AuditWhere {
  filters: AuditFilterClause[]
  /** Inclusive lower bound, epoch ms. */
  fromMs?: number
  /** Exclusive upper bound, epoch ms. */
  toMs?: number
  /** `:own` narrowing. */
  userId?: string
  workspaceId?: string
}

export type AuditQB = SelectQueryBuilder<Database, 'audit_events', object>

export function whereAudit(dialect: StoreDialect, qb: AuditQB, orgId: string, w: AuditWhere): AuditQB {
  let q = qb.where('org_id', '=', orgId)
  if (w.workspaceId !== undefined) q = q.where('workspace_id', '=', w.workspaceId)
  if (w.userId !== undefined) q = q.where('user_id', '=', w.userId)
  if (w.fromMs !== undefined) q = q.where('ts', '>=', w.fromMs)
  if (w.toMs !== undefined) q = q.where('ts', '<', w.toMs)
  for (const f of w.filters) q = q.where((eb) => filterExpression(eb, dialect, f))
  return q
}

function filterExpression(eb: ExpressionBuilder<Database, 'audit_events'>, dialect: StoreDialect, f: AuditFilterClause): Expression<SqlBool> {
  if (f.column === 'counter') {
    if (f.op === 'populated') return sql<SqlBool>`(${dialect.jsonNonEmpty('debits')} OR ${dialect.jsonNonEmpty('budget_state')})`
    const any = sql.join(
      f.values.map((k) => sql`(${dialect.jsonHasKey('debits', k)} OR ${dialect.jsonHasKey('budget_state', k)})`),
      sql` OR `,
    )
    return f.op === 'in' ? sql<SqlBool>`(${any})` : sql<SqlBool>`NOT (${any})`
  }
  const col = f.column
  if (f.op === 'populated') return eb.and([eb(col, 'is not', null), eb(col, '<>', '')])
  if (f.op === 'in') return eb(col, 'in', f.values)
  // not-in keeps rows where the column is absent: their value is not one of the listed ones.
  return eb.or([eb(col, 'is', null), eb(col, 'not in', f.values)])
}
