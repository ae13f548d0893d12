// Workspaces and tasks: extends the proxy's minimal `workspaces` table (which keeps
// working for its activation lookup) with the controller's columns, and creates `tasks`.
// `state` stays the actual state; `desired_state` is what the API asked for (running | stopped |
// archived) — the reconcile loop moves one toward the other (docs/workspaces.md).
import type { StoreMigration } from './types.js'

export const workspacesTasks: StoreMigration = {
  name: '20261122T111000-workspaces',
  async up(db) {
    // SQLite takes one ADD COLUMN per statement.
    const add = (name: string, type: 'text' | 'integer', build?: (c: any) => any) =>
      db.schema.alterTable('workspaces').addColumn(name, type, build ?? ((c: any) => c)).execute()
    await add('desired_state', 'text', (c) => c.notNull().defaultTo('running'))
    /** Identity for `:own` matches: the user id for sessions, the key id for API keys. */
    await add('created_by', 'text')
    await add('task_count', 'integer', (c) => c.notNull().defaultTo(0))
    await add('parent_workspace_id', 'text')
    await add('fork_point_task_count', 'integer')
    await add('fork_source_snapshot_ref', 'text')
    await add('last_activity_at', 'text')
    await add('last_snapshot_ref', 'text')
    await add('stopped_once', 'integer', (c) => c.notNull().defaultTo(0))
    await add('archived_at', 'text')
    await add('failure', 'text')
    await db.schema.createIndex('workspaces_org_state_idx').on('workspaces').columns(['org_id', 'state']).execute()
    await db.schema.createIndex('workspaces_role_idx').on('workspaces').columns(['role_id']).execute()

    await db.schema
      .createTable('tasks')
      .addColumn('id', 'text', (c) => c.primaryKey())
      .addColumn('org_id', 'text', (c) => c.notNull().references('orgs.id').onDelete('cascade'))
      .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
      .addColumn('status', 'text', (c) => c.notNull())
      .addColumn('reason', 'text')
      .addColumn('description', 'text', (c) => c.notNull())
      .addColumn('options', 'text', (c) => c.notNull().defaultTo('{}'))
      .addColumn('metadata', 'text')
      .addColumn('uploads', 'text', (c) => c.notNull().defaultTo('[]'))
      .addColumn('summary', 'text')
      .addColumn('created_by', 'text', (c) => c.notNull())
      .addColumn('created_at', 'text', (c) => c.notNull())
      .addColumn('updated_at', 'text', (c) => c.notNull())
      .addColumn('started_at', 'text')
      .addColumn('finished_at', 'text')
      .execute()
    await db.schema.createIndex('tasks_workspace_idx').on('tasks').columns(['workspace_id', 'created_at']).execute()
    await db.schema.createIndex('tasks_status_idx').on('tasks').columns(['status']).execute()
  },
}
