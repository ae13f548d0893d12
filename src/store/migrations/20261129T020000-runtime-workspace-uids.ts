// Each workspace's own host uid (docs/runtime.md "One uid per workspace"): a row per uid handed
// out from the sandbox uid range. The primary key on `uid` is what keeps two replicas from handing
// out the same one; `workspace_id` is unique so a workspace never holds two. A row is deleted only
// when the workspace's files are gone, so a uid is reused only once nothing of it is left.
import type { StoreMigration } from './types.js'

export const runtimeWorkspaceUids: StoreMigration = {
  name: '20261129T020000-runtime-workspace-uids',
  async up(db) {
    await db.schema
      .createTable('workspace_uids')
      .addColumn('uid', 'bigint', (c) => c.primaryKey())
      .addColumn('workspace_id', 'text', (c) => c.notNull().unique())
      .addColumn('allocated_at', 'text', (c) => c.notNull())
      .execute()
  },
}
