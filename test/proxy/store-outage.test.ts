// The store goes away under the proxy (issue 14 §2): a phase that meets the outage (workspace
// activation, the org's secrets, a budget lease) is a transient fault, answered 503 with
// Retry-After and `detail.store_unavailable`, with its one row; a real fault of the proxy stays a
// 500. The directory seam stands in for the store here; test/chaos restarts a real PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { WorkspaceRecord } from '../../src/proxy/workspaces.js'
import { startHarness, type Harness } from './harness.js'

let failure: Error | undefined

describe('the proxy while the store is unavailable', () => {
  let h: Harness
  beforeAll(async () => {
    h = await startHarness({
      directory: {
        lookup: async (id: string): Promise<WorkspaceRecord | undefined> => {
          if (failure) throw failure
          return (await import('../../src/store/proxy-tables.js')).proxyTables(h.store.db).workspaces.lookup(id)
        },
      },
    })
  })
  afterAll(async () => {
    await h.close()
  })

  const target = (): string => `https://127.0.0.1:${h.up.httpsPort}/x`

  it('a store outage inside the phases is 503 with Retry-After and detail.store_unavailable, one row', async () => {
    for (const err of [Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }), Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' }), new Error('Connection terminated unexpectedly')]) {
      failure = err
      const { token } = await h.workspace(null)
      const before = h.audit.decisions().length
      const res = await h.fetch(target(), { token })
      expect(res.status).toBe(503)
      expect(res.headers.get('retry-after')).toBe('2')
      expect(JSON.parse(res.body).error).toMatchObject({ reason: 'internal_error', detail: { store_unavailable: true } })
      expect(h.audit.decisions().slice(before)).toMatchObject([{ reason: 'internal_error', detail: { store_unavailable: true } }])
    }
    expect(h.proxy.stats().storeUnavailable).toBe(3)
    failure = undefined
    const { token } = await h.workspace(null)
    expect(JSON.parse((await h.fetch(target(), { token })).body).error.reason).toBe('no_policy')
  })

  it('any other fault stays a 500 internal_error', async () => {
    failure = new Error('a bug')
    const { token } = await h.workspace(null)
    const res = await h.fetch(target(), { token })
    expect(res.status).toBe(500)
    expect(res.headers.get('retry-after')).toBeNull()
    failure = undefined
  })
})
