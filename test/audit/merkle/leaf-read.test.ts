// What verification reads from the database (the leaf reader its threads use, rows streamed as
// arrays of values and encoded by rowEncoder) must give every stored row exactly the leaf bytes of
// the API row's RFC 8785 encoding, and the hash the appender committed. Rows are stored straight
// (store.audit.insertBatch, no vocabulary), with hostile values: any well-formed text (quotes,
// backslashes, control characters, U+2028, astral and combining characters), timestamps with time
// zones, integers at the column's limits, and JSON columns with unicode keys, big and tiny
// numbers, nulls and nesting — on a real PostgreSQL and on SQLite.
import fc from 'fast-check'
import { v7 as uuidv7 } from 'uuid'
import { describe, expect, it } from 'vitest'
import { ProvableLog } from '../../../src/audit/index.js'
import { canonicalRow, hashLeafHex, rowEncoder } from '../../../src/audit/merkle/index.js'
import type { AuditEvent } from '../../../src/contract/index.js'
import { LEAF_COLUMNS, openLeafReader } from '../../../src/store/index.js'
import { storeTarget, testDialects } from '../../helpers/dialects.js'
import { orgId } from '../fixtures.js'
import { quietLogger } from '../writer-helpers.js'
import { hostile } from './hostile-rows.js'

for (const d of testDialects()) {
  describe(`verification's read of the database [${d.name}]`, () => {
    it('gives every row the leaf bytes of the API row\'s canonical encoding, and the appended leaf hash', { timeout: 300_000 }, async () => {
      const store = await d.open()
      const target = storeTarget(store)!
      const reader = await openLeafReader(target.url, target.schema ? { schema: target.schema } : {})
      const log = new ProvableLog({ store, logger: quietLogger() })
      try {
        await fc.assert(fc.asyncProperty(fc.array(hostile, { minLength: 1, maxLength: 8 }), async (partials) => {
          const org = orgId()
          const events = partials.map((p) => ({ ...p, id: uuidv7(), org_id: org }) as unknown as AuditEvent)
          // null in a column is no value: the API leaves it out.
          for (const e of events) for (const [k, v] of Object.entries(e)) if (v === null) delete (e as unknown as Record<string, unknown>)[k]
          expect(await store.audit.insertBatch(events)).toBe(events.length)
          await log.append()
          const read: Array<{ id: string; leaf: string; bytes: string }> = []
          let encode: (values: readonly unknown[]) => string = () => ''
          await reader.range(org, 0, events.length, {
            begin(columns) {
              encode = rowEncoder(columns, LEAF_COLUMNS)
              read.length = 0
            },
            row(values) {
              read.push({ id: String(values[1]), leaf: String(values[2]), bytes: encode(values) })
            },
          })
          expect(read.map((r) => r.id).sort()).toEqual(events.map((e) => e.id).sort())
          for (const r of read) {
            const api = await store.audit.getById(org, r.id)
            expect(r.bytes).toBe(canonicalRow(api!))
            expect(hashLeafHex(r.bytes)).toBe(r.leaf)
          }
        }), { numRuns: 40 })
      } finally {
        await reader.close()
      }
    })
  })
}
