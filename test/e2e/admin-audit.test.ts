// `corral admin audit query` and `corral admin audit quarantine`: the real binary on a store.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createAuditWriter } from '../../src/audit/index.js'
import { PLATFORM_ORG, type AuditEvent } from '../../src/contract/index.js'
import { openStore } from '../../src/store/index.js'
import type { QuarantinedEvent } from '../../src/store/index.js'
import { decision, mutation } from '../audit/fixtures.js'
import { runCorral } from '../helpers/serve.js'

describe('corral admin audit', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-admin-audit-'))
  const db = `sqlite:${join(dir, 'corral.db')}`
  const ids: Record<string, string> = {}
  beforeAll(async () => {
    const store = await openStore(db)
    const writer = createAuditWriter(store, { logger: { error: () => {} } })
    ids.noToken = (await writer.emit(decision(PLATFORM_ORG, { user_id: 'system', decision: 'deny', reason: 'no_token', path: '/a' }))).id
    ids.invalid = (await writer.emit(decision(PLATFORM_ORG, { user_id: 'system', decision: 'deny', reason: 'invalid_token', path: '/b' }))).id
    ids.org = (await writer.emit(mutation('org_someone'))).id
    ids.quarantined = (await writer.emit({ ...mutation('org_someone'), event_type: 'made_up' as never })).id
    await writer.close()
    await store.close()
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('query reads the platform scope only, with the audit query filters', async () => {
    const all = await runCorral(['admin', 'audit', 'query', '--db', db, '--json'])
    expect(all.code, all.stderr).toBe(0)
    const events = (JSON.parse(all.stdout) as { events: AuditEvent[] }).events
    expect(events.map((e) => e.id).sort()).toEqual([ids.noToken, ids.invalid].sort())
    const filtered = await runCorral(['admin', 'audit', 'query', '--db', db, '--filter', 'path=/a', '--json'])
    expect((JSON.parse(filtered.stdout) as { events: AuditEvent[] }).events.map((e) => e.id)).toEqual([ids.noToken])
    const bad = await runCorral(['admin', 'audit', 'query', '--db', db, '--filter', 'nope=1'])
    expect(bad.code).not.toBe(0)
    expect(bad.stderr).toMatch(/filter/)
  })

  it('quarantine lists the quarantined event with its reason', async () => {
    const r = await runCorral(['admin', 'audit', 'quarantine', '--db', db, '--json'])
    expect(r.code, r.stderr).toBe(0)
    const { events } = JSON.parse(r.stdout) as { events: QuarantinedEvent[] }
    expect(events).toHaveLength(1)
    expect(events[0]).toMatchObject({ id: ids.quarantined, org_id: 'org_someone', reason: expect.stringMatching(/^invalid_event: event_type/) })
    expect(JSON.parse(events[0].event)).toMatchObject({ event_type: 'made_up' })
    const text = await runCorral(['admin', 'audit', 'quarantine', '--db', db])
    expect(text.stdout).toMatch(/invalid_event/)
  })
})
