import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openStore, type Store } from '../../src/store/index.js'
import { testDialects } from '../helpers/dialects.js'

for (const d of testDialects()) {
  describe(`store repositories [${d.name}]`, () => {
    let store: Store
    beforeAll(async () => {
      store = await d.open()
    })
    afterAll(async () => {
      await store.close()
    })

    const newOrg = async (name = `org-${Math.random().toString(36).slice(2)}`) => (await store.orgs.create({ name }))!

    it('pings and reports its dialect', async () => {
      await store.ping()
      expect(store.dialect).toBe(d.name)
    })

    it('creates orgs with prefixed ids, refuses duplicate names, sets posture', async () => {
      const org = await newOrg('acme-' + d.name)
      expect(org.id).toMatch(/^org_[0-9a-f]{32}$/)
      expect(org.posture).toBe('active')
      expect(await store.orgs.create({ name: 'acme-' + d.name })).toBeUndefined()
      expect(await store.orgs.get(org.id)).toEqual(org)
      expect(await store.orgs.getByName(org.name)).toEqual(org)
      expect((await store.orgs.setPosture(org.id, 'past_due'))?.posture).toBe('past_due')
      expect(await store.orgs.setPosture('org_missing', 'active')).toBeUndefined()
      await expect(store.orgs.setPosture(org.id, 'bogus' as never)).rejects.toThrow(/posture/)
      expect((await store.orgs.list()).map((o) => o.id)).toContain(org.id)
    })

    it('users are unique by case-insensitive email', async () => {
      const a = await store.users.create({ email: ` Ada@Example.COM ` })
      const b = await store.users.create({ email: 'ada@example.com' })
      expect(b.id).toBe(a.id)
      expect(a.email).toBe('ada@example.com')
      expect(await store.users.getByEmail('ADA@example.com')).toEqual(a)
      expect(await store.users.get(a.id)).toEqual(a)
      expect(await store.users.get('usr_nope')).toBeUndefined()
    })

    it('memberships: invite, accept once, first seen once, cross-org not found', async () => {
      const org = await newOrg()
      const other = await newOrg()
      const u = await store.users.create({ email: `m-${org.id}@x.io` })
      const m = (await store.memberships.invite(org.id, { user_id: u.id, email: u.email, role: 'member', invited_by: 'usr_boss' }))!
      expect(m).toMatchObject({ org_id: org.id, user_id: u.id, role: 'member', status: 'pending', invited_by: 'usr_boss' })
      expect(m.invitation_id).toMatch(/^inv_/)
      expect(await store.memberships.invite(org.id, { user_id: u.id, email: u.email, role: 'admin' })).toBeUndefined()
      expect(await store.memberships.get(other.id, u.id)).toBeUndefined()
      expect(await store.memberships.list(other.id)).toEqual([])
      expect(await store.memberships.markFirstSeen(org.id, u.id)).toBe(false) // still pending

      const first = await store.memberships.accept(m.invitation_id)
      expect(first?.accepted).toBe(true)
      expect(first?.membership.status).toBe('active')
      expect((await store.memberships.accept(m.invitation_id))?.accepted).toBe(false)
      expect(await store.memberships.accept('inv_unknown')).toBeUndefined()

      const seen = await Promise.all([1, 2, 3].map(() => store.memberships.markFirstSeen(org.id, u.id)))
      expect(seen.filter(Boolean)).toHaveLength(1)
      expect((await store.memberships.get(org.id, u.id))?.first_seen_at).toBeDefined()
      expect(await store.memberships.markFirstSeen(other.id, u.id)).toBe(false)
      expect((await store.memberships.listForUser(u.id)).map((x) => x.org_id)).toEqual([org.id])
    })

    it('refuses to demote or remove the last active owner', async () => {
      const org = await newOrg()
      const a = await store.users.create({ email: `a-${org.id}@x.io` })
      const b = await store.users.create({ email: `b-${org.id}@x.io` })
      await store.memberships.invite(org.id, { user_id: a.id, email: a.email, role: 'owner', status: 'active' })
      expect(await store.memberships.countOwners(org.id)).toBe(1)
      expect(await store.memberships.updateRoleUnlessLastOwner(org.id, a.id, 'admin')).toEqual({ ok: false, reason: 'last_owner' })
      expect(await store.memberships.removeUnlessLastOwner(org.id, a.id)).toEqual({ ok: false, reason: 'last_owner' })
      expect(await store.memberships.removeUnlessLastOwner(org.id, 'usr_nobody')).toEqual({ ok: false, reason: 'not_found' })

      // A pending owner invitation does not count as an owner.
      await store.memberships.invite(org.id, { user_id: b.id, email: b.email, role: 'owner' })
      expect(await store.memberships.countOwners(org.id)).toBe(1)
      expect((await store.memberships.updateRoleUnlessLastOwner(org.id, a.id, 'member')).ok).toBe(false)

      const promoted = await store.memberships.accept((await store.memberships.get(org.id, b.id))!.invitation_id)
      expect(promoted?.membership.role).toBe('owner')
      expect(await store.memberships.countOwners(org.id)).toBe(2)

      // Two concurrent demotions of the last two owners: exactly one wins.
      const results = await Promise.all([
        store.memberships.updateRoleUnlessLastOwner(org.id, a.id, 'member'),
        store.memberships.updateRoleUnlessLastOwner(org.id, b.id, 'member'),
      ])
      expect(results.filter((r) => r.ok)).toHaveLength(1)
      expect(results.find((r) => !r.ok)).toEqual({ ok: false, reason: 'last_owner' })
      expect(await store.memberships.countOwners(org.id)).toBe(1)
      const winner = results.find((r) => r.ok)
      expect(winner).toMatchObject({ ok: true, from_role: 'owner', membership: { role: 'member' } })

      // Promote back and remove one owner: allowed while another remains.
      const demoted = winner!.ok ? winner!.membership.user_id : ''
      expect((await store.memberships.updateRoleUnlessLastOwner(org.id, demoted, 'owner')).ok).toBe(true)
      const removed = await store.memberships.removeUnlessLastOwner(org.id, demoted)
      expect(removed).toMatchObject({ ok: true, from_role: 'owner' })
      expect(await store.memberships.get(org.id, demoted)).toBeUndefined()
    })

    it('concurrent removals of two owners leave one', async () => {
      const org = await newOrg()
      const ids: string[] = []
      for (const n of ['x', 'y']) {
        const u = await store.users.create({ email: `${n}-${org.id}@x.io` })
        await store.memberships.invite(org.id, { user_id: u.id, email: u.email, role: 'owner', status: 'active' })
        ids.push(u.id)
      }
      const results = await Promise.all(ids.map((id) => store.memberships.removeUnlessLastOwner(org.id, id)))
      expect(results.filter((r) => r.ok)).toHaveLength(1)
      expect(await store.memberships.countOwners(org.id)).toBe(1)
    })

    it('api keys: public columns only, lookup by hash, cross-org not found, delete', async () => {
      const org = await newOrg()
      const other = await newOrg()
      const key = await store.apiKeys.create(org.id, {
        label: 'ci', permission_set: 'read_only', created_by_user_id: 'usr_1', secret_hash: `hash-${org.id}`, prefix: 'ck_ab12…',
      })
      expect(key.id).toMatch(/^key_/)
      expect(key).not.toHaveProperty('secret_hash')
      expect(key.last_used_at).toBeUndefined()
      const listed = await store.apiKeys.list(org.id)
      expect(listed).toEqual([key])
      expect(JSON.stringify(listed)).not.toContain('hash-')
      expect(await store.apiKeys.get(other.id, key.id)).toBeUndefined()
      expect(await store.apiKeys.list(other.id)).toEqual([])

      const found = await store.apiKeys.findByHash(`hash-${org.id}`)
      expect(found?.key).toEqual(key)
      expect(found?.org).toEqual(await store.orgs.get(org.id))
      expect(await store.apiKeys.findByHash('nope')).toBeUndefined()

      await store.apiKeys.touchLastUsed(key.id, '2026-01-02T03:04:05.000Z')
      expect((await store.apiKeys.get(org.id, key.id))?.last_used_at).toBe('2026-01-02T03:04:05.000Z')

      expect(await store.apiKeys.delete(other.id, key.id)).toBeUndefined()
      expect((await store.apiKeys.delete(org.id, key.id))?.id).toBe(key.id)
      expect(await store.apiKeys.findByHash(`hash-${org.id}`)).toBeUndefined()
      expect(await store.apiKeys.delete(org.id, key.id)).toBeUndefined()
    })

    it('settings: set, get, setIfAbsent is first writer wins', async () => {
      expect(await store.settings.get('k1')).toBeUndefined()
      await store.settings.set('k1', 'a')
      await store.settings.set('k1', 'b')
      expect(await store.settings.get('k1')).toBe('b')
      const winners = await Promise.all(['x', 'y', 'z'].map((v) => store.settings.setIfAbsent('k2', v)))
      expect(new Set(winners).size).toBe(1)
      expect(await store.settings.get('k2')).toBe(winners[0])
    })

    it('webhook nonces are accepted once; expired ones are purged', async () => {
      const future = new Date(Date.now() + 60_000).toISOString()
      expect(await store.webhookNonces.remember('n1', future)).toBe(true)
      expect(await store.webhookNonces.remember('n1', future)).toBe(false)
      expect(await store.webhookNonces.remember('n2', new Date(Date.now() - 1000).toISOString())).toBe(true)
      // n2 expired: the next call purges it, so it is accepted again.
      expect(await store.webhookNonces.remember('n2', future)).toBe(true)
    })

    it('transactions roll back together and notify only after commit', async () => {
      const got: string[] = []
      const stop = await store.listen('test_tx', (p) => got.push(p))
      const name = `tx-${Math.random()}`
      await expect(
        store.transaction(async (tx) => {
          await tx.orgs.create({ name })
          tx.notify('test_tx', 'rolled-back')
          throw new Error('boom')
        }),
      ).rejects.toThrow('boom')
      expect(await store.orgs.getByName(name)).toBeUndefined()
      const org = await store.transaction(async (tx) => {
        const o = await tx.orgs.create({ name })
        tx.notify('test_tx', 'committed')
        return o
      })
      expect(await store.orgs.get(org!.id)).toBeDefined()
      await expect.poll(() => got).toEqual(['committed'])
      await stop()
    })

    it('a notification handler that throws or rejects reaches neither the process nor the channel\'s other handlers', async () => {
      const got: string[] = []
      const warnings: string[] = []
      const onWarning = (w: Error & { code?: string }) => void (w.code === 'CORRAL_NOTIFY_HANDLER' && warnings.push(w.message))
      process.on('warning', onWarning)
      const stops = [
        await store.listen('test_fault', () => {
          throw new Error('sync fault')
        }),
        await store.listen('test_fault', (() => Promise.reject(new Error('async fault'))) as never),
        await store.listen('test_fault', (p) => got.push(p)),
      ]
      await store.notify('test_fault', 'one')
      await expect.poll(() => got).toEqual(['one'])
      await store.notify('test_fault', 'two')
      await expect.poll(() => got).toEqual(['one', 'two'])
      await expect.poll(() => warnings.length).toBeGreaterThan(0)
      expect(warnings[0]).toMatch(/handler of the test_fault notification failed: (sync|async) fault/)
      process.off('warning', onWarning)
      for (const stop of stops) await stop()
    })

    it('refuses bad notify channel names', async () => {
      await expect(store.notify('Bad Channel;', 'x')).rejects.toThrow(/channel/)
    })
  })
}

describe('openStore', () => {
  it('refuses an unknown URL scheme without echoing credentials', async () => {
    await expect(openStore('mysql://user:secret@host/db')).rejects.toThrow(/unsupported store URL/)
    await expect(openStore('mysql://user:secret@host/db')).rejects.not.toThrow(/secret/)
  })
})
