// A role's `agent_kind` (docs/roles.md "Agent kind", a documented addition to the spec's Agent
// role): which agent its workspaces run. Null: the reference agent, or an attached pack's agent.
import type { StoreMigration } from './types.js'

export const agentsRoleAgentKind: StoreMigration = {
  name: '20261129T064500-agents-role-agent-kind',
  async up(db) {
    await db.schema.alterTable('agent_roles').addColumn('agent_kind', 'text').execute()
  },
}
