// The packs repository on every dialect: round trip of every field (bigint size, manifest JSON),
// visibility (own + community), per-org name uniqueness, org-scoped writes, findVisible's order,
// rolesAttaching across orgs (archived roles excluded) and digest reference checks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Store } from '../../src/store/index.js'
import type { PackInput } from '../../src/store/repositories/packs.js'
import { testDialects } from '../helpers/dialects.js'

const DIGEST = `sha256:${'a'.repeat(64)}`

const input = (name: string, extra: Partial<PackInput> = {}): PackInput => ({
  name,
  display_name: `${name} pack`,
  version: '1.0.0',
  tier: 'community',
  visibility: 'org',
  image_origin: 'upload',
  image_digest: DIGEST,
  size_bytes: 123,
  manifest: { name, version: '1.0.0', display_name: `${name} pack` },
  ...extra,
})

for (const d of testDialects()) {
  describe(`packs store [${d.name}]`, () => {
    let store: Store
    beforeAll(async () => {
      store = await d.open()
    })
    afterAll(() => store.close())
    let n = 0
    const newOrg = async () => (await store.orgs.create({ name: `packs-${d.name}-${++n}-${Date.now()}` }))!

    it('round-trips every field, with a size over 32 bits and the parsed manifest', async () => {
      const org = await newOrg()
      const manifest = { name: 'full', version: '2', display_name: 'Full', agent: { command: ['run', 'it'], env: { A: 'b' } }, agent_events: { tool_call: { type: 'object' } } }
      const pack = await store.packs.create(org.id, input('full', {
        description: 'd', category: 'c', capabilities: '- name: a\n', suggested_packs: 'x,y', size_bytes: 5 * 1024 ** 3,
        image_ref: 'registry/x:1', manifest, created_by: 'user_1',
      }))
      expect(pack.id).toMatch(/^pack_[0-9a-f]{32}$/)
      const read = await store.packs.get(org.id, pack.id)
      expect(read).toEqual(pack)
      expect(read).toMatchObject({ org_id: org.id, name: 'full', size_bytes: 5 * 1024 ** 3, manifest, tier: 'community', visibility: 'org', image_origin: 'upload' })
      const bare = await store.packs.create(org.id, input('bare', { image_digest: null, size_bytes: null }))
      expect(bare.description).toBeUndefined()
      expect(bare.image_digest).toBeUndefined()
      expect(await store.packs.get(org.id, bare.id)).toEqual(bare)
    })

    it('shows own and community packs, hides other orgs\' private ones, names unique per org', async () => {
      const a = await newOrg()
      const b = await newOrg()
      const priv = await store.packs.create(a.id, input('tools'))
      const pub = await store.packs.create(a.id, input('shared', { visibility: 'community', category: 'dev' }))
      expect(await store.packs.get(b.id, priv.id)).toBeUndefined()
      expect((await store.packs.get(b.id, pub.id))?.id).toBe(pub.id)
      // Another org may use the same name; the same org may not.
      const mine = await store.packs.create(b.id, input('tools'))
      await expect(store.packs.create(a.id, input('tools'))).rejects.toMatchObject({ code: expect.stringMatching(/^(23505|SQLITE_CONSTRAINT_UNIQUE)$/) })
      expect((await store.packs.getByName(b.id, 'tools'))?.id).toBe(mine.id)
      expect(await store.packs.getByName(b.id, 'shared')).toBeUndefined()
      const listB = (await store.packs.list(b.id)).map((p) => p.id)
      expect(listB).toContain(pub.id)
      expect(listB).toContain(mine.id)
      expect(listB).not.toContain(priv.id)
      expect((await store.packs.list(b.id, { owned: true })).map((p) => p.id)).toEqual([mine.id])
      expect((await store.packs.list(b.id, { category: 'dev' })).map((p) => p.id)).toEqual([pub.id])
      expect((await store.packs.list(b.id, { name: 'tools' })).map((p) => p.id)).toEqual([mine.id])
    })

    it('writes only the org\'s own rows', async () => {
      const a = await newOrg()
      const b = await newOrg()
      const pub = await store.packs.create(a.id, input('p', { visibility: 'community' }))
      expect(await store.packs.update(b.id, pub.id, { display_name: 'x' })).toBeUndefined()
      expect(await store.packs.delete(b.id, pub.id)).toBeUndefined()
      const updated = await store.packs.update(a.id, pub.id, { display_name: 'New', description: 'now', visibility: 'org', manifest: { name: 'p', version: '2', display_name: 'New' }, version: '2' })
      expect(updated).toMatchObject({ display_name: 'New', description: 'now', visibility: 'org', version: '2', manifest: { version: '2' } })
      expect(updated!.updated_at >= pub.updated_at).toBe(true)
      const cleared = await store.packs.update(a.id, pub.id, { description: null })
      expect(cleared?.description).toBeUndefined()
      expect(await store.packs.get(b.id, pub.id)).toBeUndefined()
      expect((await store.packs.delete(a.id, pub.id))?.id).toBe(pub.id)
      expect(await store.packs.get(a.id, pub.id)).toBeUndefined()
    })

    it('findVisible keeps the order asked for and drops missing or invisible ids', async () => {
      const a = await newOrg()
      const b = await newOrg()
      const x = await store.packs.create(a.id, input('x'))
      const y = await store.packs.create(a.id, input('y'))
      const hidden = await store.packs.create(b.id, input('hidden'))
      const shared = await store.packs.create(b.id, input('shared', { visibility: 'community' }))
      const found = await store.packs.findVisible(a.id, [y.id, 'pack_missing', hidden.id, shared.id, x.id])
      expect(found.map((p) => p.id)).toEqual([y.id, shared.id, x.id])
      expect(found[0]!.manifest.name).toBe('y')
      expect(await store.packs.findVisible(a.id, [])).toEqual([])
    })

    it('rolesAttaching finds non-archived roles of every org, exactly by id', async () => {
      const a = await newOrg()
      const b = await newOrg()
      const pack = await store.packs.create(a.id, input('att', { visibility: 'community' }))
      const provA = await store.providers.create(a.id, { name: 'p', kind: 'anthropic', domain: 'api.anthropic.com' })
      const provB = await store.providers.create(b.id, { name: 'p', kind: 'anthropic', domain: 'api.anthropic.com' })
      const r1 = await store.agentRoles.create(a.id, { name: 'r1', provider_id: provA.id, pack_ids: [pack.id] })
      const r2 = await store.agentRoles.create(b.id, { name: 'r2', provider_id: provB.id, pack_ids: ['pack_other', pack.id] })
      const archived = await store.agentRoles.create(a.id, { name: 'r3', provider_id: provA.id, pack_ids: [pack.id] })
      await store.agentRoles.setArchived(a.id, archived.id, true)
      // A longer id that merely starts with this one does not count.
      await store.agentRoles.create(a.id, { name: 'r4', provider_id: provA.id, pack_ids: [`${pack.id}x`] })
      await store.agentRoles.create(a.id, { name: 'r5', provider_id: provA.id })
      const attaching = await store.packs.rolesAttaching(pack.id)
      expect(attaching).toHaveLength(2)
      expect(attaching).toEqual(expect.arrayContaining([{ org_id: a.id, role_id: r1.id }, { org_id: b.id, role_id: r2.id }]))
      expect(await store.packs.rolesAttaching('pack_nobody')).toEqual([])
    })

    it('digestInUse sees every org\'s rows', async () => {
      const a = await newOrg()
      const digest = `sha256:${'b'.repeat(64)}`
      expect(await store.packs.digestInUse(digest)).toBe(false)
      const p = await store.packs.create(a.id, input('d', { image_digest: digest }))
      expect(await store.packs.digestInUse(digest)).toBe(true)
      await store.packs.delete(a.id, p.id)
      expect(await store.packs.digestInUse(digest)).toBe(false)
    })

    it('is reachable inside a transaction', async () => {
      const a = await newOrg()
      const id = await store.transaction(async (tx) => (await tx.packs.create(a.id, input('tx'))).id)
      expect((await store.packs.get(a.id, id))?.name).toBe('tx')
    })
  })
}
