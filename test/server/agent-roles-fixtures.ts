// A WorkspaceControl over the real workspaces table, standing in for the workspace controller
// (which owns provisioning) in the role/provider route tests: it counts and flips real rows with
// the seam's documented semantics, and records the restart calls the routes make.
import type { Kysely } from 'kysely'
import type { WorkspaceControl } from '../../src/server/workspace-control.js'
import type { Store } from '../../src/store/index.js'

const ACTIVE = ['provisioning', 'idle', 'busy', 'stopping']
const STOPPABLE = ['provisioning', 'idle', 'busy']

export function tableWorkspaceControl(store: Store): WorkspaceControl & { restarts: string[] } {
  const db = store.db as unknown as Kysely<{ workspaces: { org_id: string; role_id: string; state: string } }>
  const restarts: string[] = []
  return {
    restarts,
    async activeCount(orgId, roleIds) {
      if (roleIds.length === 0) return 0
      const row = await db.selectFrom('workspaces').select((eb) => eb.fn.countAll<number>().as('n'))
        .where('org_id', '=', orgId).where('role_id', 'in', roleIds).where('state', 'in', ACTIVE).executeTakeFirstOrThrow()
      return Number(row.n)
    },
    async stopForRole(orgId, roleId) {
      const res = await db.updateTable('workspaces').set({ state: 'stopping' })
        .where('org_id', '=', orgId).where('role_id', '=', roleId).where('state', 'in', STOPPABLE).executeTakeFirst()
      return Number(res.numUpdatedRows)
    },
    async restartIdleForRole(orgId, roleId) {
      restarts.push(roleId)
      const row = await db.selectFrom('workspaces').select((eb) => eb.fn.countAll<number>().as('n'))
        .where('org_id', '=', orgId).where('role_id', '=', roleId).where('state', '=', 'idle').executeTakeFirstOrThrow()
      return Number(row.n)
    },
  }
}
