// The providers and agent-roles repositories on every dialect: the migration that extends the
// proxy's tables, round trips of every field, org scoping, the archive cascade and that the
// proxy's own minimal queries still work on the extended tables.
import { describe, expect, it } from 'vitest'
import { testDialects } from '../helpers/dialects.js'
import { proxyTables } from '../../src/store/proxy-tables.js'

for (const d of testDialects()) {
  describe(`providers and agent roles store [${d.name}]`, () => {
    it('round-trips every field, scopes by org and cascades archive', async () => {
      const store = await d.open()
      const org = (await store.orgs.create({ name: `o-${Date.now()}` }))!
      const other = (await store.orgs.create({ name: `p-${Date.now()}` }))!
      const prov = await store.providers.create(org.id, {
        name: 'anthropic', display_name: 'Anthropic', kind: 'anthropic', domain: 'api.anthropic.com',
        base_url: 'https://api.anthropic.com', default_model: 'claude-x', created_by: 'u1',
      })
      expect(prov).toMatchObject({ name: 'anthropic', kind: 'anthropic', domain: 'api.anthropic.com', default_model: 'claude-x' })
      expect(prov.archived_at).toBeUndefined()
      expect(await store.providers.get(other.id, prov.id)).toBeUndefined()
      expect((await store.providers.getByName(org.id, 'anthropic'))?.id).toBe(prov.id)

      const role = await store.agentRoles.create(org.id, {
        name: 'coder', provider_id: prov.id, display_name: 'Coder', model: 'm', capabilities: '- name: a\n',
        environment: 'staging', environment_description: 'env', task_timeout_seconds: 600, idle_timeout_seconds: 60,
        thinking_effort: 'low', max_continuations: 3, max_context_tokens: 100000, pool_policy: 'dynamic', pool_size: 1,
        pool_max_size: 4, pack_ids: ['pack_a', 'pack_b'],
      })
      const read = await store.agentRoles.get(org.id, role.id)
      expect(read).toEqual(role)
      expect(read).toMatchObject({
        environment: 'staging', task_timeout_seconds: 600, pool_policy: 'dynamic', pool_max_size: 4, pack_ids: ['pack_a', 'pack_b'],
      })
      expect(await store.agentRoles.get(other.id, role.id)).toBeUndefined()
      expect((await store.agentRoles.getByName(org.id, 'coder'))?.id).toBe(role.id)

      // Partial update: absent fields untouched, null clears, pack_ids replaced only when present.
      const upd = await store.agentRoles.update(org.id, role.id, { description: 'd', model: null })
      expect(upd).toMatchObject({ description: 'd', pack_ids: ['pack_a', 'pack_b'], pool_size: 1 })
      expect(upd!.model).toBeUndefined()
      expect((await store.agentRoles.update(org.id, role.id, { pack_ids: [] }))!.pack_ids).toEqual([])
      expect(await store.agentRoles.update(other.id, role.id, { description: 'x' })).toBeUndefined()

      // The proxy's minimal rows and its activation join still work on the extended tables.
      const pt = proxyTables(store.db)
      const pid = await pt.workspaces.createProvider(org.id, { name: 'bare' })
      const rid = await pt.workspaces.createRole(org.id, { name: 'bare-role', provider_id: pid })
      expect(await store.agentRoles.get(org.id, rid)).toMatchObject({ pool_policy: '', pack_ids: [], environment: 'development' })
      const ws = await pt.workspaces.create(org.id, { role_id: role.id, created_by_user_id: 'u1' })
      expect(await pt.workspaces.lookup(ws)).toMatchObject({ role: 'coder', provider: 'anthropic', environment: 'staging' })

      const cascaded = await store.transaction(async (tx) => {
        await tx.providers.setArchived(org.id, prov.id, true)
        return tx.agentRoles.archiveByProvider(org.id, prov.id)
      })
      expect(cascaded).toBe(1)
      expect((await store.agentRoles.list(org.id)).map((r) => r.name)).toEqual(['bare-role'])
      expect((await store.agentRoles.list(org.id, { includeArchived: true })).map((r) => r.name)).toEqual(['bare-role', 'coder'])
      expect((await store.providers.list(org.id)).map((p) => p.name)).toEqual(['bare'])
      expect(await store.agentRoles.idsByProvider(org.id, prov.id)).toEqual([role.id])
      expect(await store.agentRoles.archiveByProvider(org.id, prov.id)).toBe(0)

      expect((await store.agentRoles.delete(org.id, rid))?.name).toBe('bare-role')
      expect(await store.agentRoles.delete(org.id, rid)).toBeUndefined()
      await store.close()
    })
  })
}
