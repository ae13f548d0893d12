// Warm pools and stops across two replicas on one PostgreSQL database, in process (two workspace
// services, each on its own store connection pool and runtime root, each with the real
// LeaseOwnership over the real leases table; docs/workspaces.md "Warm pools across replicas"):
// concurrent fills through both keep a pool at its global target, each member leased by one
// replica; 20 parallel claims through both get 20 distinct members; a dynamic pool's pressure noted
// on one replica raises the other's target; a dead replica's members are taken over by the other;
// a stop asked on B of a workspace A runs names the caller in `workspace_stopped`.
// The seat (the replica's heartbeat) is driven by the test so that "A dies" is "A stops beating".
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, expect, it } from 'vitest'
import { createAuditWriter, type AuditWriter } from '../../src/audit/index.js'

import { CapabilityTokens } from '../../src/secrets/index.js'
import { replicaLeases, type Store } from '../../src/store/index.js'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { LeaseOwnership, WorkspaceService, type ReplicaSeat } from '../../src/workspaces/index.js'
import { describePostgres, openSibling, testDialects } from '../helpers/dialects.js'
import { STAND_IN_AGENT, waitFor } from './harness.js'
import { processRuntime } from '../runtime/drivers.js'

const TTL_MS = 1500

interface Replica { id: string; store: Store; service: WorkspaceService; audit: AuditWriter; die(): void; close(): Promise<void> }

/** A replica's seat whose heartbeat the test can stop (a kill -9, as far as the database can tell). */
async function seat(store: Store, id: string): Promise<ReplicaSeat & { die(): void }> {
  const leases = replicaLeases(store)
  await leases.register({ id, host: 'test', dataDir: `/${id}` }, TTL_MS)
  const cbs = new Set<(held: readonly string[]) => void>()
  const timer = setInterval(() => {
    void leases.heartbeat(id, TTL_MS).then((held) => { for (const cb of cbs) cb(held) }, () => {})
  }, TTL_MS / 3)
  return {
    id, ttlMs: TTL_MS, leases,
    onBeat(cb) { cbs.add(cb); return () => void cbs.delete(cb) },
    die: () => clearInterval(timer),
  }
}

describePostgres('workspaces across two replicas (PostgreSQL)', () => {
  const dialect = testDialects().find((d) => d.name === 'postgres')!
  const cleanups: Array<() => Promise<void>> = []
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => {})
  })

  async function replica(store: Store, name: string, tokens: CapabilityTokens): Promise<Replica> {
    const root = mkdtempSync(join(tmpdir(), `corral-rep-${name}-`))
    const s = await seat(store, `rep_${name}_${randomBytes(3).toString('hex')}`)
    const audit = createAuditWriter(store, { flushIntervalMs: 1 })
    const runtime = processRuntime({ root: join(root, 'runtime'), proxy: { host: '127.0.0.1', port: 9 }, warn: () => {}, stopGraceMs: 500 })
    const service = new WorkspaceService({
      store, audit, runtime, tokens, agentCommand: [process.execPath, STAND_IN_AGENT], stagingRoot: join(root, 'uploads'),
      reconcileIntervalMs: 60_000, warmAgents: false, ownership: new LeaseOwnership(store, s), remoteWaitMs: 20_000,
    })
    await service.start()
    let closed = false
    const close = async () => {
      if (closed) return
      closed = true
      s.die()
      await service.close()
      await runtime.close()
      await audit.close()
      rmSync(root, { recursive: true, force: true })
    }
    cleanups.push(close)
    return { id: s.id, store, service, audit, die: s.die, close }
  }

  /** Two replicas on one schema, and a role (pool settings applied after both started). */
  async function pair(pool?: { policy: 'static' | 'dynamic'; size: number; max?: number }) {
    const storeA = await dialect.open()
    const storeB = await openSibling(storeA)
    const tokens = new CapabilityTokens(new Uint8Array(randomBytes(32)))
    const org = (await storeA.orgs.create({ name: `org-${randomBytes(4).toString('hex')}` }))!
    const t = proxyTables(storeA.db)
    const provider = await t.workspaces.createProvider(org.id, { name: 'anthropic' })
    const roleId = await t.workspaces.createRole(org.id, { name: 'coder', provider_id: provider })
    const a = await replica(storeA, 'a', tokens)
    const b = await replica(storeB, 'b', tokens)
    if (pool) {
      await storeA.db.updateTable('agent_roles' as never).set({ pool_policy: pool.policy, pool_size: pool.size, pool_max_size: pool.max ?? null } as never)
        .where('id' as never, '=', roleId as never).execute()
    }
    const role = (await storeA.workspaces.role(org.id, { id: roleId }))!
    const members = async () => (await storeA.workspaces.list(org.id, {})).filter((w) => w.pooled && (w.state === 'provisioning' || w.state === 'idle'))
    const owners = async (ids: string[]) => replicaLeases(storeA).liveOwners(ids)
    return { a, b, orgId: org.id, role, members, owners, store: storeA }
  }

  it('concurrent fills through both replicas keep a static pool at its target, each member leased by one replica; 20 parallel claims get 20 distinct members', async () => {
    const { a, b, orgId, role, members, owners } = await pair({ policy: 'static', size: 20 })
    await Promise.all([a.service.fillPools(), b.service.fillPools(), a.service.fillPools(), b.service.fillPools()])
    const pool = await members()
    expect(pool).toHaveLength(20)
    const leased = await owners(pool.map((w) => w.id))
    expect(leased.size).toBe(20)
    expect([...leased.values()].every((o) => o === a.id || o === b.id)).toBe(true)
    await waitFor(async () => (await members()).every((w) => w.state === 'idle'), '20 idle members')
    // Another round of fills on a full pool makes nothing.
    await Promise.all([a.service.fillPools(), b.service.fillPools()])
    expect(await members()).toHaveLength(20)

    const actor = { userId: 'usr_claims', creatorId: 'usr_claims' }
    const created = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).service.createWorkspace(orgId, actor, role)))
    const ids = created.map((c) => c.workspace.id)
    expect(new Set(ids).size).toBe(20)
    expect(new Set(ids)).toEqual(new Set(pool.map((w) => w.id)))
    for (const c of created) expect(c.workspace).toMatchObject({ pooled: false, created_by: 'usr_claims', state: 'idle' })
  }, 60_000)

  it('a dynamic pool\'s pressure noted on A raises B\'s target; a dead replica\'s members are taken over by the other', async () => {
    const { a, b, orgId, role, members, owners, store } = await pair({ policy: 'dynamic', size: 1, max: 3 })
    await a.service.fillPools()
    await waitFor(async () => { const m = await members(); return m.length === 1 && m.every((w) => w.state === 'idle') }, 'one idle member')
    const actor = { userId: 'usr_p', creatorId: 'usr_p' }
    // Three creates through A: the first drains the pool, the others find it empty (pressure 3).
    for (let i = 0; i < 3; i++) await a.service.createWorkspace(orgId, actor, role)
    const dynamicRole = (await store.agentRoles.get(orgId, role.id))!
    expect(b.service.poolTarget(dynamicRole)).toBe(1) // B has not read the shared pressure yet
    await b.service.fillPools()
    expect(b.service.poolTarget(dynamicRole)).toBe(3)
    await Promise.all([a.service.fillPools(), b.service.fillPools()])
    expect(await members()).toHaveLength(3)
    await waitFor(async () => (await members()).every((w) => w.state === 'idle'), 'three idle members')

    // A dies: its members' leases expire, B takes them over; the pool stays at 3, all B's.
    const pool = (await members()).map((w) => w.id)
    const ofA = [...(await owners(pool))].filter(([, o]) => o === a.id).map(([id]) => id)
    a.die()
    await a.service.close()
    await waitFor(async () => {
      const o = await owners(pool)
      return o.size === 3 && [...o.values()].every((x) => x === b.id)
    }, 'B to own every member', 20_000)
    await b.service.fillPools()
    const after = await members()
    expect(after.map((w) => w.id).sort()).toEqual([...pool].sort())
    expect(after.every((w) => w.state === 'idle')).toBe(true)
    // Those that were A's were taken over (a fresh provision on B), not made again.
    expect(ofA.every((id) => pool.includes(id))).toBe(true)
  }, 60_000)

  it('a stop asked on B of a workspace that A runs is carried out by A and names the caller', async () => {
    const { a, b, orgId, role, owners, store } = await pair()
    const { workspace } = await a.service.createWorkspace(orgId, { userId: 'usr_creator', creatorId: 'usr_creator' }, role)
    await waitFor(async () => (await store.workspaces.byId(workspace.id))?.state === 'idle', 'the workspace idle on A')
    expect((await owners([workspace.id])).get(workspace.id)).toBe(a.id)
    const stopped = await b.service.stop(orgId, workspace.id, 'usr_stopper')
    expect(stopped.state).toBe('stopped')
    await a.audit.flush()
    await b.audit.flush()
    const events = await store.audit.page(orgId, { filters: [], workspaceId: workspace.id, order: 'asc', limit: 100 })
    expect(events.filter((e) => e.event_type === 'workspace_stopped').map((e) => e.user_id)).toEqual(['usr_stopper'])
    // The same through archive.
    const second = (await a.service.createWorkspace(orgId, { userId: 'usr_creator', creatorId: 'usr_creator' }, role)).workspace
    await waitFor(async () => (await store.workspaces.byId(second.id))?.state === 'idle', 'the second workspace idle')
    expect((await b.service.archive(orgId, second.id, 'usr_archiver')).state).toBe('archived')
    await a.audit.flush()
    const more = await store.audit.page(orgId, { filters: [], workspaceId: second.id, order: 'asc', limit: 100 })
    expect(more.filter((e) => ['workspace_stopped', 'workspace_archived'].includes(e.event_type)).map((e) => [e.event_type, e.user_id]))
      .toEqual([['workspace_stopped', 'usr_archiver'], ['workspace_archived', 'usr_archiver']])
  }, 60_000)
})
