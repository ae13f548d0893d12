// A role's `resources` (docs/roles.md "Resources", a documented addition to the spec's Agent
// role): the Kubernetes requests and limits of its workspaces' agent container, as JSON text.
import type { StoreMigration } from './types.js'

export const k8sRoleResources: StoreMigration = {
  name: '20261126T112800-k8s-role-resources',
  async up(db) {
    await db.schema.alterTable('agent_roles').addColumn('resources', 'text').execute()
  },
}
