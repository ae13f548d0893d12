// Store wrappers for audit writer tests: the real store, with the audit insert intercepted.
import { AUDIT_ROW_COLUMNS, type Store } from '../../src/store/index.js'

type InsertFn = (rows: readonly unknown[][]) => Promise<string[]>

export const quietLogger = (sink: string[] = []) => ({ error: (_o: object, msg: string) => void sink.push(msg), warn: (_o: object, msg: string) => void sink.push(msg) })

/**
 * A Store whose audit insert goes through `wrap` (the rest is the real store). The writer inserts
 * encoded lines; `wrap` sees them as rows (values in AUDIT_ROW_COLUMNS order) and `orig` takes
 * those rows, or any subset of them, back to their lines.
 */
export function withInsert(store: Store, wrap: (orig: InsertFn, rows: readonly unknown[][]) => Promise<string[]>): Store {
  return {
    ...store,
    audit: {
      ...store.audit,
      insertEncodedReturningIds: (lines) => {
        const lineOf = new Map<readonly unknown[], string>()
        const rows = lines.map((line) => {
          const o = JSON.parse(line) as Record<string, unknown>
          const row = AUDIT_ROW_COLUMNS.map((c) => o[c] ?? null)
          lineOf.set(row, line)
          return row
        })
        return wrap((r) => store.audit.insertEncodedReturningIds(r.map((row) => lineOf.get(row)!)), rows)
      },
    },
  }
}

/** Fails an insert with the error `fail` returns for its rows (values in AUDIT_ROW_COLUMNS order). */
export function failing(store: Store, fail: (rows: readonly unknown[][]) => Error | undefined): Store {
  return withInsert(store, async (orig, rows) => {
    const err = fail(rows)
    if (err) throw err
    return orig(rows)
  })
}

export function spyInserts(store: Store, sizes: number[]): Store {
  return withInsert(store, (orig, rows) => {
    sizes.push(rows.length)
    return orig(rows)
  })
}

/** {a: {a: … {}}} nested `depth` levels, built without recursion. */
export function nested(depth: number): Record<string, unknown> {
  let v: Record<string, unknown> = {}
  for (let i = 0; i < depth; i++) v = { a: v }
  return v
}
