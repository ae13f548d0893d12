// Warm pools with pool_policy `dynamic` (docs/workspaces.md "Dynamic pools") on a real store and
// the real `process` runtime: the pool grows with claim pressure up to pool_max_size (never past
// it, even with concurrent fills and claims), and surplus members are stopped once idle long
// enough. The controller's clock is injected and the fill pass is awaited directly: no sleeping
// on the rule's windows.
import { afterEach, describe, expect, it } from 'vitest'
import { DEFAULT_POOL_DEMAND_WINDOW_MS, DEFAULT_POOL_IDLE_SECONDS } from '../../src/workspaces/index.js'
import { testDialects } from '../helpers/dialects.js'
import { controllerRig, waitFor, type ControllerRig, type RigOptions } from './harness.js'

for (const dialect of testDialects()) {
  describe(`warm pools: dynamic (${dialect.name})`, () => {
    let rig: ControllerRig | undefined
    afterEach(async () => {
      await rig?.close()
      rig = undefined
    })

    /** A clock that only moves when the test says so (plus real time, so fresh rows are "now"). */
    let offsetMs = 0
    const setup = async (opts: RigOptions) => {
      offsetMs = 0
      return (rig = await controllerRig(await dialect.open(), { ...opts, now: () => Date.now() + offsetMs }))
    }
    const members = async (r: ControllerRig) => (await r.store.workspaces.list(r.orgId, {})).filter((w) => w.pooled)
    const unclaimed = async (r: ControllerRig) => (await members(r)).filter((w) => w.state === 'provisioning' || w.state === 'idle')
    const allIdle = (r: ControllerRig, n: number) =>
      waitFor(async () => { const m = await unclaimed(r); return m.length === n && m.every((w) => w.state === 'idle') && m }, `${n} idle members`)
    const role = async (r: ControllerRig) => (await r.store.agentRoles.get(r.orgId, r.role.id))!

    it('grows with claim pressure, never past pool_max_size (concurrent claims and fills), and shrinks to pool_size when idle', async () => {
      const r = await setup({ poolSize: 1, poolPolicy: 'dynamic', poolMaxSize: 3 })
      await allIdle(r, 1)
      expect(r.controller.poolTarget(await role(r))).toBe(1)

      // A burst of claims: the first drains the pool, the rest find it empty; fills run alongside.
      await Promise.all(Array.from({ length: 6 }, () => r.controller.createWorkspace(r.orgId, r.actor, r.role)))
      expect(r.controller.poolTarget(await role(r))).toBe(3)
      await Promise.all([r.controller.fillPools(), r.controller.fillPools(), r.controller.fillPools()])
      expect((await unclaimed(r)).length).toBe(3)

      // More pressure and more concurrent fills: the ceiling holds.
      await Promise.all([
        ...Array.from({ length: 4 }, () => r.controller.createWorkspace(r.orgId, r.actor, r.role)),
        r.controller.fillPools(), r.controller.fillPools(),
      ])
      await r.controller.fillPools()
      expect((await unclaimed(r)).length).toBe(3)
      expect((await members(r)).length).toBe(3) // none made and dropped past the ceiling
      const ready = await allIdle(r, 3)

      // The window passed but the members have not idled long enough: nothing is stopped.
      offsetMs = DEFAULT_POOL_DEMAND_WINDOW_MS + 1000
      expect(r.controller.poolTarget(await role(r))).toBe(1)
      await r.controller.fillPools()
      expect((await unclaimed(r)).length).toBe(3)

      // Idle past the default idle time (the role has no idle_timeout_seconds): back to pool_size.
      offsetMs = (DEFAULT_POOL_IDLE_SECONDS + 1) * 1000
      await r.controller.fillPools()
      const left = await unclaimed(r)
      expect(left).toHaveLength(1)
      // Members made in the same millisecond are ordered by id (UUIDv7, monotonic), as the store does.
      const newest = [...ready].sort((a, b) => a.created_at.localeCompare(b.created_at) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).at(-1)!
      expect(left[0]!.id).toBe(newest.id) // the oldest members go first
      for (const w of ready.filter((x) => x.id !== newest.id)) {
        const gone = (await r.store.workspaces.byId(w.id))!
        expect(gone).toMatchObject({ state: 'stopped', desired_state: 'stopped', pooled: false, created_by: 'system' })
        await r.audit.flush()
        const seen = await r.store.audit.page(r.orgId, { filters: [], workspaceId: w.id, order: 'asc', limit: 100 })
        expect(seen.map((e) => [e.event_type, e.user_id])).toContainEqual(['workspace_stopped', 'system'])
      }
      // A claim still gets the remaining member.
      const { workspace } = await r.controller.createWorkspace(r.orgId, r.actor, r.role)
      expect(workspace.id).toBe(newest.id)
    })

    it('a claim that leaves ready members is no pressure; the role\'s idle_timeout_seconds sets the idle age', async () => {
      const r = await setup({ poolSize: 2, poolPolicy: 'dynamic', poolMaxSize: 4, idleTimeoutSeconds: 30 })
      await allIdle(r, 2)
      await r.controller.createWorkspace(r.orgId, r.actor, r.role) // one left ready (a refill only adds)
      expect(r.controller.poolTarget(await role(r))).toBe(2)
      await Promise.all(Array.from({ length: 4 }, () => r.controller.createWorkspace(r.orgId, r.actor, r.role)))
      expect(r.controller.poolTarget(await role(r))).toBeGreaterThanOrEqual(3)
      await r.controller.fillPools()
      expect((await unclaimed(r)).length).toBeGreaterThanOrEqual(3)
      await waitFor(async () => (await unclaimed(r)).every((w) => w.state === 'idle'), 'members idle')
      // Past the window and the role's 30 s, well short of the 600 s default: back to pool_size.
      offsetMs = DEFAULT_POOL_DEMAND_WINDOW_MS + 31_000
      await r.controller.fillPools()
      expect((await unclaimed(r)).length).toBe(2)
    })

    it('members made in the same millisecond are claimed in id order (oldest first, whatever the row order)', async () => {
      const r = await setup({ poolSize: 3, poolPolicy: 'static' })
      const ids = (await allIdle(r, 3)).map((w) => w.id).sort()
      // One creation time for all three, written newest first: on Postgres each update moves the
      // row, so a claim that ordered ties by row position would take the newest.
      for (const id of [...ids].reverse()) {
        await r.store.db.updateTable('workspaces' as never).set({ created_at: '2026-01-01T00:00:00.000Z' } as never).where('id' as never, '=', id as never).execute()
      }
      const claimed: string[] = []
      for (const _ of ids) claimed.push((await r.controller.createWorkspace(r.orgId, r.actor, r.role)).workspace.id)
      expect(claimed).toEqual(ids)
    })

    it('static is unchanged: pool_max_size and pressure do not grow it, idle members are never stopped', async () => {
      const r = await setup({ poolSize: 1, poolPolicy: 'static', poolMaxSize: 3 })
      await allIdle(r, 1)
      await Promise.all(Array.from({ length: 3 }, () => r.controller.createWorkspace(r.orgId, r.actor, r.role)))
      expect(r.controller.poolTarget(await role(r))).toBe(1)
      await r.controller.fillPools()
      await allIdle(r, 1)
      offsetMs = (DEFAULT_POOL_IDLE_SECONDS + 1) * 1000 + DEFAULT_POOL_DEMAND_WINDOW_MS
      await r.controller.fillPools()
      expect((await unclaimed(r)).length).toBe(1)
      expect((await members(r)).filter((w) => w.state === 'stopped')).toHaveLength(0)
    })

    it('role stop-workspaces stops the workspaces in use and leaves unclaimed pool members to the pool', async () => {
      const r = await setup({ poolSize: 1, poolPolicy: 'static' })
      const [member] = await allIdle(r, 1)
      await r.controller.fillPools()
      expect(await r.controller.activeCount(r.orgId, [r.role.id])).toBe(0)
      expect(await r.controller.stopForRole(r.orgId, r.role.id)).toBe(0)
      expect((await unclaimed(r)).map((w) => w.id)).toEqual([member.id])
    })

    it('dynamic with pool_size 0 grows from zero with claim pressure, up to pool_max_size, and shrinks back to 0', async () => {
      const r = await setup({ poolSize: 0, poolPolicy: 'dynamic', poolMaxSize: 2 })
      await r.controller.fillPools()
      expect(await members(r)).toHaveLength(0)
      expect(r.controller.poolTarget(await role(r))).toBe(0)

      // Cold creates with no pool are pressure: the pool grows to the ceiling, not past it.
      await Promise.all(Array.from({ length: 3 }, () => r.controller.createWorkspace(r.orgId, r.actor, r.role)))
      expect(r.controller.poolTarget(await role(r))).toBe(2)
      await r.controller.fillPools()
      const ready = await allIdle(r, 2)

      // A claim now takes a warm member.
      const { workspace } = await r.controller.createWorkspace(r.orgId, r.actor, r.role)
      expect(ready.map((w) => w.id)).toContain(workspace.id)
      await r.controller.fillPools()
      await allIdle(r, 2)

      // The window passed and the members idled long enough: back to 0, all retired.
      offsetMs = (DEFAULT_POOL_IDLE_SECONDS + 1) * 1000 + DEFAULT_POOL_DEMAND_WINDOW_MS
      expect(r.controller.poolTarget(await role(r))).toBe(0)
      await r.controller.fillPools()
      expect(await unclaimed(r)).toHaveLength(0)
    })

    it('dynamic without pool_max_size (or below pool_size) stays at pool_size', async () => {
      const r = await setup({ poolSize: 2, poolPolicy: 'dynamic' })
      await allIdle(r, 2)
      await Promise.all(Array.from({ length: 3 }, () => r.controller.createWorkspace(r.orgId, r.actor, r.role)))
      expect(r.controller.poolTarget(await role(r))).toBe(2)
      expect(r.controller.poolTarget({ ...(await role(r)), pool_max_size: 1 })).toBe(2)
      await r.controller.fillPools()
      expect((await unclaimed(r)).length).toBe(2)
    })
  })
}
