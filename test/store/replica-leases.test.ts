// Replicas, workspace leases and concurrency permits on both dialects (src/store/replica-leases.ts):
// one owner per lease, renewal by heartbeat, takeover only after expiry, permits never beyond max.
import { randomBytes } from 'node:crypto'
import { afterAll, describe, expect, it } from 'vitest'
import { proxyTables } from '../../src/store/proxy-tables.js'
import { concurrencyPermits, replicaLeases, type Store } from '../../src/store/index.js'
import { openSibling, testDialects } from '../helpers/dialects.js'

async function workspace(store: Store): Promise<string> {
  const org = (await store.orgs.create({ name: `org-${randomBytes(4).toString('hex')}` }))!
  const t = proxyTables(store.db)
  const providerId = await t.workspaces.createProvider(org.id, { name: 'anthropic' })
  const roleId = await t.workspaces.createRole(org.id, { name: 'coder', provider_id: providerId })
  return store.workspaces.create(org.id, { role_id: roleId, created_by: 'usr_test', created_by_user_id: 'usr_test' })
}

for (const d of testDialects()) {
  describe(`replica leases [${d.name}]`, () => {
    const stores: Store[] = []
    afterAll(async () => {
      for (const s of stores.reverse()) await s.close()
    })
    const open = async () => {
      const s = await d.open()
      stores.push(s)
      return s
    }

    it('one owner at a time; the owner renews, another takes over only after expiry', async () => {
      const store = await open()
      const leases = replicaLeases(store)
      const ws = await workspace(store)
      await leases.register({ id: 'rep_a', host: 'h', dataDir: '/a' }, 1000, 10_000)
      await leases.register({ id: 'rep_b', host: 'h', dataDir: '/b' }, 1000, 10_000)
      expect(await leases.acquire(ws, 'rep_a', 1000, 10_000)).toEqual({ acquired: true, previousOwner: null })
      expect(await leases.acquire(ws, 'rep_b', 1000, 10_500)).toEqual({ acquired: false, owner: 'rep_a', expiresAt: 11_000 })
      // A's heartbeat renews the lease it holds.
      expect(await leases.heartbeat('rep_a', 1000, 10_900)).toEqual([ws])
      expect(await leases.acquire(ws, 'rep_b', 1000, 11_500)).toMatchObject({ acquired: false, owner: 'rep_a' })
      expect(await leases.owner(ws, 11_500)).toEqual({ owner: 'rep_a', expiresAt: 11_900 })
      expect(await leases.liveOwners([ws, 'ws_none'], 11_500)).toEqual(new Map([[ws, 'rep_a']]))
      expect(await leases.liveOwners([ws], 12_000)).toEqual(new Map())
      // A stops beating: after expiry the lease is listed and B takes it over.
      expect(await leases.expired(12_000)).toEqual([{ workspaceId: ws, owner: 'rep_a' }])
      expect(await leases.owner(ws, 12_000)).toBeUndefined()
      expect(await leases.acquire(ws, 'rep_b', 1000, 12_000)).toEqual({ acquired: true, previousOwner: 'rep_a' })
      // A comes back: its heartbeat no longer lists the lease, and it cannot take it back.
      expect(await leases.heartbeat('rep_a', 1000, 12_100)).toEqual([])
      expect(await leases.acquire(ws, 'rep_a', 1000, 12_100)).toMatchObject({ acquired: false, owner: 'rep_b' })
      // Re-acquiring one's own lease renews it and is no takeover.
      expect(await leases.acquire(ws, 'rep_b', 1000, 12_200)).toEqual({ acquired: true, previousOwner: null })
      await leases.release(ws, 'rep_a') // not A's: nothing happens
      expect(await leases.owner(ws, 12_300)).toMatchObject({ owner: 'rep_b' })
      await leases.release(ws, 'rep_b')
      expect(await leases.owner(ws, 12_300)).toBeUndefined()
      expect(await leases.acquire(ws, 'rep_a', 1000, 12_300)).toEqual({ acquired: true, previousOwner: null })
    })

    it('a predecessor on the same host and data dir is dead at once; deregister frees everything', async () => {
      const store = await open()
      const leases = replicaLeases(store)
      const ws = await workspace(store)
      const now = Date.now()
      await leases.register({ id: 'rep_old', host: 'h1', dataDir: '/srv/corral' }, 60_000, now)
      await leases.acquire(ws, 'rep_old', 60_000, now)
      const permits = concurrencyPermits(store)
      expect(await permits.takePermits('k', 'rep_old', 5, 2, 60_000, now)).toBe(2)
      const self = { id: 'rep_new', host: 'h1', dataDir: '/srv/corral' }
      await leases.register(self, 60_000, now)
      expect(await leases.expirePredecessors(self)).toEqual(['rep_old'])
      expect((await leases.liveReplicas(now)).map((r) => r.id)).toEqual(['rep_new'])
      expect(await leases.acquire(ws, 'rep_new', 60_000, now)).toEqual({ acquired: true, previousOwner: 'rep_old' })
      expect(await permits.takePermits('k', 'rep_new', 5, 5, 60_000, now)).toBe(5)
      await leases.deregister('rep_new')
      expect(await leases.owner(ws, now)).toBeUndefined()
      expect(await leases.liveReplicas(now)).toEqual([])
      expect(await permits.takePermits('k', 'rep_x', 5, 5, 60_000, now)).toBe(5)
    })

    it('dead replica rows are reaped after the horizon (their leases stay for the takeover); a corral proxy row is no predecessor of a serve', async () => {
      const store = await open()
      const leases = replicaLeases(store)
      const permits = concurrencyPermits(store)
      const ws = await workspace(store)
      const now = 100_000
      await leases.register({ id: 'rep_dead', host: 'h2', dataDir: '/d' }, 1000, now)
      await leases.register({ id: 'rep_proxy', host: 'h2', dataDir: '/d', kind: 'proxy' }, 1000, now)
      await leases.acquire(ws, 'rep_dead', 1000, now)
      expect(await permits.takePermits('k2', 'rep_dead', 5, 3, 1000, now)).toBe(3)
      // Dead since now + 1000, the horizon is 10 s: not yet at now + 10_999.
      expect(await leases.reapDead(10_000, now + 10_999)).toEqual([])
      expect(await leases.reapDead(10_000, now + 11_001)).toEqual(expect.arrayContaining(['rep_dead', 'rep_proxy']))
      expect(await leases.liveReplicas(now)).toEqual([])
      // The lease is still there, expired: whoever reconciles the workspace takes it over from rep_dead.
      expect(await leases.expired(now + 11_001)).toEqual([{ workspaceId: ws, owner: 'rep_dead' }])
      expect(await leases.acquire(ws, 'rep_live', 1000, now + 11_001)).toEqual({ acquired: true, previousOwner: 'rep_dead' })
      expect(await permits.takePermits('k2', 'rep_live', 5, 5, 1000, now + 11_001)).toBe(5)
      // A restarted serve on the same host and data dir expires its own earlier rows, never a corral proxy's.
      const t = Date.now()
      await leases.register({ id: 'rep_px', host: 'h3', dataDir: '/e', kind: 'proxy' }, 60_000, t)
      await leases.register({ id: 'rep_s1', host: 'h3', dataDir: '/e' }, 60_000, t)
      const self = { id: 'rep_s2', host: 'h3', dataDir: '/e' }
      await leases.register(self, 60_000, t)
      expect(await leases.expirePredecessors(self)).toEqual(['rep_s1'])
      expect((await leases.liveReplicas(t)).map((r) => [r.id, r.kind]).sort()).toEqual([['rep_px', 'proxy'], ['rep_s2', 'serve']])
    })

    it('permits: live holders together never pass max; an expired holder gives its permits back', async () => {
      const store = await open()
      // A second connection pool on Postgres (another process); SQLite's writers are serialised in
      // one process (two connections here would only block the event loop in each other's lock).
      const other = d.name === 'postgres' ? await openSibling(store) : store
      if (other !== store) stores.push(other)
      const a = concurrencyPermits(store)
      const b = concurrencyPermits(other)
      const now = 50_000
      // 40 parallel single-permit takes by two holders on two connections: exactly 5 granted.
      const takes = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? a : b).takePermits('ws|c', i % 2 ? 'rep_a' : 'rep_b', 5, 1, 1000, now)))
      expect(takes.reduce((x, y) => x + y, 0)).toBe(5)
      const heldByA = takes.filter((n, i) => n === 1 && i % 2 === 1).length
      await a.returnPermits('ws|c', 'rep_a', heldByA)
      expect(await b.takePermits('ws|c', 'rep_b', 5, 10, 1000, now)).toBe(heldByA)
      // B stops beating: its permits count until they expire, then they are free again.
      expect(await a.takePermits('ws|c', 'rep_a', 5, 1, 1000, now + 500)).toBe(0)
      expect(await a.takePermits('ws|c', 'rep_a', 5, 9, 1000, now + 1001)).toBe(5)
    })
  })
}
