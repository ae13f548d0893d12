// The agent's own output (stdout and stderr, combined) of each workspace, kept in the database so
// any replica serves `GET /v1/workspaces/{id}/logs` (docs/workspaces.md "Agent
// output"). Chunks are numbered per workspace (`seq`, the SSE event id); the owner replica appends
// them and trims the oldest beyond the retention cap (src/store/workspace-logs.ts).
import type { StoreMigration } from './types.js'

export const workspaceLogs: StoreMigration = {
  name: '20261126T103000-cli-workspace-logs',
  async up(db) {
    await db.schema
      .createTable('workspace_logs')
      .addColumn('workspace_id', 'text', (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
      .addColumn('seq', 'bigint', (c) => c.notNull())
      .addColumn('at', 'text', (c) => c.notNull())
      .addColumn('text', 'text', (c) => c.notNull())
      .addColumn('bytes', 'integer', (c) => c.notNull())
      .addPrimaryKeyConstraint('workspace_logs_pk', ['workspace_id', 'seq'])
      .execute()
  },
}
