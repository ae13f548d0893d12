// The provable log's routes: checkpoints (listed, signed on demand), inclusion proofs of a row
// and consistency proofs between checkpoints, each checked with the RFC 9162 verifier against the
// signed root; permissions (read_only may read, a member's :own reaches only its own rows' proofs)
// and the envelope for what does not exist.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { LogSigner, ProvableLog } from '../../src/audit/index.js'
import { openCheckpoint, parseVerifierKey, remoteInput, rowLeafHash, verifyConsistency, verifyInclusion, verifyLog } from '../../src/audit/merkle/index.js'
import { remoteLog } from '../../src/cli/audit-bundle.js'
import { createHarness, type Harness } from './harness.js'

const hex = (h: string) => Buffer.from(h, 'hex')

describe('audit log routes', () => {
  let h: Harness
  beforeAll(async () => {
    h = await createHarness()
    h.deps.auditLog = new ProvableLog({ store: h.store, logger: { error: () => {} }, signer: await LogSigner.open(mkdtempSync(join(tmpdir(), 'corral-routes-'))) })
  })
  afterAll(() => h.close())

  const seed = async (orgId: string, userId: string, n: number) => {
    for (let i = 0; i < n; i++) await h.audit.emit({ org_id: orgId, user_id: userId, event_type: 'task_submitted', category: 'activity', actor: 'control-plane', detail: { i } })
    await h.audit.flush()
  }

  it('signs on demand, lists checkpoints with their keys, and proves inclusion and consistency', async () => {
    const { orgId, ownerKey } = await h.newOrg()
    await seed(orgId, 'system', 5)
    const first = await h.inject('POST', '/v1/audit/checkpoints', { token: ownerKey })
    expect(first.status).toBe(200)
    await seed(orgId, 'system', 6)
    const second = await h.inject('POST', '/v1/audit/checkpoints', { token: ownerKey })
    expect(second.body.size).toBeGreaterThan(first.body.size)

    const list = await h.inject('GET', '/v1/audit/checkpoints', { token: ownerKey })
    expect(list.status).toBe(200)
    expect(list.body.checkpoints.map((c: { size: number }) => c.size)).toEqual([first.body.size, second.body.size])
    expect(list.body.tree_size).toBe(second.body.size)
    const keys = list.body.keys.map((k: { vkey: string }) => parseVerifierKey(k.vkey)!)
    const signed = openCheckpoint(second.body.note, keys)
    expect(signed.ok && signed.checkpoint.root.toString('hex')).toBe(second.body.root_hash)
    expect((await h.inject('GET', `/v1/audit/checkpoints?after_size=${first.body.size}`, { token: ownerKey })).body.checkpoints).toHaveLength(1)

    const events = (await h.inject('GET', '/v1/audit?order=asc&limit=100', { token: ownerKey })).body.events as Array<{ id: string }>
    for (const e of events.slice(0, 4)) {
      const p = await h.inject('GET', `/v1/audit/proofs/inclusion?id=${e.id}`, { token: ownerKey })
      expect(p.status).toBe(200)
      expect(verifyInclusion(p.body.leaf_index, p.body.tree_size, hex(p.body.leaf_hash), p.body.proof.map(hex), hex(second.body.root_hash))).toBe(true)
    }
    const old = await h.inject('GET', `/v1/audit/proofs/inclusion?id=${events[0].id}&tree_size=${first.body.size}`, { token: ownerKey })
    expect(verifyInclusion(old.body.leaf_index, first.body.size, hex(old.body.leaf_hash), old.body.proof.map(hex), hex(first.body.root_hash))).toBe(true)

    const c = await h.inject('GET', `/v1/audit/proofs/consistency?from=${first.body.size}&to=${second.body.size}`, { token: ownerKey })
    expect(c.status).toBe(200)
    expect(verifyConsistency(first.body.size, second.body.size, c.body.proof.map(hex), hex(first.body.root_hash), hex(second.body.root_hash))).toBe(true)
  })

  it('serves the tree with its rows, which verify online against the signed checkpoints', async () => {
    const { orgId, ownerKey } = await h.newOrg()
    await seed(orgId, 'system', 7)
    await h.inject('POST', '/v1/audit/checkpoints', { token: ownerKey })
    await seed(orgId, 'system', 2)
    const page = await h.inject('GET', '/v1/audit/log?from=2&limit=3', { token: ownerKey })
    expect(page.status).toBe(200)
    expect(page.body.leaves.map((l: { index: number }) => l.index)).toEqual([2, 3, 4])
    for (const l of page.body.leaves) expect(rowLeafHash(l.row).toString('hex')).toBe(l.leaf_hash)
    const unlogged = await h.inject('GET', '/v1/audit/log/unlogged', { token: ownerKey })
    expect(unlogged.body.rows.every((r: { pending: boolean }) => r.pending)).toBe(true)
    const client = { request: async (method: string, path: string) => (await h.inject(method as 'GET', `/v1${path}`, { token: ownerKey })).body }
    const report = await verifyLog(await remoteInput(await remoteLog(client as never), {}))
    expect(report.findings.filter((f) => f.error)).toEqual([])
    expect(report.org_id).toBe(orgId)
    expect((await h.inject('GET', '/v1/audit/log', { token: (await h.member(orgId, 'member')).token })).status).toBe(403)
  })

  it('answers in the envelope for what does not exist or is malformed', async () => {
    const { orgId, ownerKey } = await h.newOrg()
    const none = await h.inject('POST', '/v1/audit/checkpoints', { token: ownerKey })
    expect(none.status).toBe(404)
    expect(none.body.error.code).toBe('not_found')
    await seed(orgId, 'system', 2)
    await h.inject('POST', '/v1/audit/checkpoints', { token: ownerKey })
    const unknown = await h.inject('GET', '/v1/audit/proofs/inclusion?id=01900000-0000-7000-8000-000000000000', { token: ownerKey })
    expect(unknown.status).toBe(404)
    expect((await h.inject('GET', '/v1/audit/proofs/consistency?from=1&to=99', { token: ownerKey })).body.error.code).toBe('not_found')
    expect((await h.inject('GET', '/v1/audit/proofs/consistency?from=3&to=1', { token: ownerKey })).body.error.code).toBe('validation_error')
    expect((await h.inject('GET', '/v1/audit/proofs/consistency?from=x&to=1', { token: ownerKey })).body.error.code).toBe('validation_error')
    expect((await h.inject('GET', '/v1/audit/proofs/inclusion', { token: ownerKey })).body.error.code).toBe('validation_error')
  })

  it('needs audit:read for the org log; a member reaches only proofs of its own rows', async () => {
    const { orgId } = await h.newOrg()
    const member = await h.member(orgId, 'member')
    const readOnly = await h.key(orgId, 'read_only')
    await seed(orgId, member.userId, 2)
    await seed(orgId, 'system', 2)
    expect((await h.inject('POST', '/v1/audit/checkpoints', { token: readOnly.value })).status).toBe(200)
    expect((await h.inject('GET', '/v1/audit/checkpoints', { token: readOnly.value })).status).toBe(200)
    expect((await h.inject('GET', '/v1/audit/checkpoints', { token: member.token })).status).toBe(403)
    expect((await h.inject('POST', '/v1/audit/checkpoints', { token: member.token })).status).toBe(403)
    expect((await h.inject('GET', '/v1/audit/proofs/consistency?from=1&to=4', { token: member.token })).status).toBe(403)
    // The refusals above are audited too: checkpoint again so every row read below is covered.
    await h.audit.flush()
    expect((await h.inject('POST', '/v1/audit/checkpoints', { token: readOnly.value })).status).toBe(200)
    const mine = (await h.inject('GET', '/v1/audit?order=asc&limit=100', { token: member.token })).body.events as Array<{ id: string; user_id: string }>
    expect(mine.length).toBeGreaterThan(0)
    expect((await h.inject('GET', `/v1/audit/proofs/inclusion?id=${mine[0].id}`, { token: member.token })).status).toBe(200)
    const all = (await h.inject('GET', '/v1/audit?limit=100', { token: readOnly.value })).body.events as Array<{ id: string; user_id: string }>
    const theirs = all.find((e) => e.user_id === 'system')!
    expect((await h.inject('GET', `/v1/audit/proofs/inclusion?id=${theirs.id}`, { token: member.token })).status).toBe(404)
    expect((await h.inject('GET', `/v1/audit/proofs/inclusion?id=${theirs.id}`, { token: readOnly.value })).status).toBe(200)
  })
})
