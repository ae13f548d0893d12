// How the task and workspace commands draw records for people.
import type { SnapshotFileEntry, TaskRecord, WorkspaceRecord } from '../client/index.js'
import { table } from './output.js'

export function workspaceTable(rows: readonly WorkspaceRecord[]): string {
  return table(rows, [
    { header: 'id', get: (w) => w.id },
    { header: 'state', get: (w) => w.state },
    { header: 'role', get: (w) => w.role_name },
    { header: 'tasks', get: (w) => w.task_count },
    { header: 'parent', get: (w) => (w.parent_workspace_id ? `${w.parent_workspace_id}@${w.fork_point_task_count}` : '') },
    { header: 'created_by', get: (w) => w.created_by },
    { header: 'created_at', get: (w) => w.created_at },
  ])
}

export function taskTable(rows: readonly TaskRecord[]): string {
  return table(rows, [
    { header: 'id', get: (t) => t.id },
    { header: 'status', get: (t) => t.status },
    { header: 'reason', get: (t) => t.reason },
    { header: 'created_at', get: (t) => t.created_at },
    { header: 'description', get: (t) => (t.description.length > 60 ? `${t.description.slice(0, 59)}…` : t.description) },
  ])
}

export function fileTable(rows: readonly SnapshotFileEntry[]): string {
  return table(rows, [
    { header: 'path', get: (f) => (f.is_dir ? `${f.path}/` : f.path) },
    { header: 'size', get: (f) => (f.is_dir ? '' : f.size) },
    { header: 'mode', get: (f) => (f.readonly ? 'ro' : 'rw') },
    { header: 'modified', get: (f) => new Date(f.mtime * 1000).toISOString() },
    { header: 'type', get: (f) => f.mime_type },
  ])
}

/** `key  value` lines for one record, in the given order, skipping absent fields. */
export function recordLines(r: object, keys: readonly string[]): string {
  const rec = r as Record<string, unknown>
  const present = keys.filter((k) => rec[k] !== undefined && rec[k] !== null)
  const width = Math.max(...present.map((k) => k.length))
  return present.map((k) => `${k.padEnd(width)}  ${typeof rec[k] === 'object' ? JSON.stringify(rec[k]) : String(rec[k])}`).join('\n') + '\n'
}

export const TASK_FIELDS = ['id', 'workspace_id', 'status', 'reason', 'summary', 'description', 'uploads', 'options', 'metadata', 'created_by', 'created_at', 'started_at', 'finished_at'] as const
export const WORKSPACE_FIELDS = [
  'id', 'state', 'desired_state', 'role_name', 'role_id', 'provider_name', 'task_count', 'has_snapshot', 'parent_workspace_id',
  'fork_point_task_count', 'fork_source_snapshot_ref', 'failure', 'created_by', 'created_at', 'last_activity_at', 'archived_at',
] as const
