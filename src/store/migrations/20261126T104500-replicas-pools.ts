// Replicas, second step (docs/workspaces.md "Warm pools across replicas",
// docs/reliability.md "Replicas"):
// - `replicas.kind`: `serve` or `proxy` (a `corral proxy` process holds `max_concurrent` permits
//   under a row of its own). A restarted serve expires only the serve rows of its host and data
//   dir, never a live `corral proxy` beside it.
// - `pool_demand`: a `dynamic` warm pool's pressure events (docs/workspaces.md "Dynamic pools"),
//   shared by every replica instead of held in one process's memory; old rows are pruned.
// - `workspaces.desired_by`: who asked for the stop or archive written in `desired_state`, so the
//   replica that carries it out names the caller in `workspace_stopped`, not the creator.
import type { StoreMigration } from './types.js'

export const replicasPools: StoreMigration = {
  name: '20261126T104500-replicas-pools',
  async up(db) {
    await db.schema.alterTable('replicas').addColumn('kind', 'text', (c) => c.notNull().defaultTo('serve')).execute()
    await db.schema
      .createTable('pool_demand')
      .addColumn('role_id', 'text', (c) => c.notNull().references('agent_roles.id').onDelete('cascade'))
      // Epoch milliseconds of the pressure event (the claiming replica's clock).
      .addColumn('at', 'bigint', (c) => c.notNull())
      .execute()
    await db.schema.createIndex('pool_demand_role_at_idx').on('pool_demand').columns(['role_id', 'at']).execute()
    await db.schema.alterTable('workspaces').addColumn('desired_by', 'text').execute()
  },
}
