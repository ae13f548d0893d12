// Typed calls for /v1/tasks and /v1/workspaces over the shared CorralClient. Task submission
// with files goes as multipart/form-data (repeatable `file` parts); everything else is JSON.
import { readFile } from 'node:fs/promises'
import { basename } from 'node:path'
import type { SnapshotFileEntry, TaskAcceptedJson, TaskJson, WorkspaceJson } from '../contract/index.js'
import type { CorralClient } from './client.js'
import { ApiConnectionError, apiErrorFrom } from './errors.js'

export { TERMINAL_TASK_STATUSES } from '../contract/index.js'

export type TaskAccepted = TaskAcceptedJson

export type TaskRecord = TaskJson

export type WorkspaceRecord = WorkspaceJson

export type { SnapshotFileEntry }

export interface TaskSubmission {
  description: string
  role_id?: string
  role_name?: string
  thinking_effort?: string
  max_continuations?: number
  max_context_tokens?: number
  reset_session?: boolean
  metadata?: Record<string, unknown>
  /** Local paths uploaded as `file` parts. */
  files?: readonly string[]
}

export function workspacesApi(client: CorralClient) {
  const e = encodeURIComponent
  /** JSON, or multipart when there are files (the server stores them under /data/uploads/<task_id>/). */
  async function submit(path: string, s: TaskSubmission): Promise<TaskAccepted> {
    const { files = [], ...fields } = s
    if (files.length === 0) return client.request('POST', path, { body: fields })
    const form = new FormData()
    for (const [k, v] of Object.entries(fields)) {
      if (v !== undefined) form.append(k, typeof v === 'object' ? JSON.stringify(v) : String(v))
    }
    for (const f of files) form.append('file', new Blob([await readFile(f)]), basename(f))
    const url = client.url(path)
    let res: Response
    try {
      res = await client.fetchImpl(url, { method: 'POST', headers: client.headers(), body: form })
    } catch (err) {
      throw new ApiConnectionError(client.apiUrl, err)
    }
    if (!res.ok) throw await apiErrorFrom(res)
    return (await res.json()) as TaskAccepted
  }
  return {
    submitTask: (s: TaskSubmission) => submit('/tasks', s),
    followUp: (workspaceId: string, s: TaskSubmission) => submit(`/workspaces/${e(workspaceId)}/tasks`, s),
    getTask: (id: string) => client.request<TaskRecord>('GET', `/tasks/${e(id)}`),
    cancelTask: (id: string) => client.request<TaskRecord>('POST', `/tasks/${e(id)}/cancel`),
    async listWorkspaces(q: { state?: string; role?: string; creator?: string } = {}): Promise<WorkspaceRecord[]> {
      return (await client.request<{ workspaces: WorkspaceRecord[] }>('GET', '/workspaces', { query: q })).workspaces
    },
    getWorkspace: (id: string) => client.request<WorkspaceRecord>('GET', `/workspaces/${e(id)}`),
    async workspaceTasks(id: string): Promise<TaskRecord[]> {
      return (await client.request<{ tasks: TaskRecord[] }>('GET', `/workspaces/${e(id)}/tasks`)).tasks
    },
    stop: (id: string) => client.request<{ status: 'stopped'; workspace: WorkspaceRecord }>('POST', `/workspaces/${e(id)}/stop`),
    archive: (id: string) => client.request<{ status: 'archived'; workspace: WorkspaceRecord }>('POST', `/workspaces/${e(id)}/archive`),
    unarchive: (id: string) => client.request<{ status: 'unarchived'; workspace: WorkspaceRecord }>('POST', `/workspaces/${e(id)}/unarchive`),
    fork: (id: string, forkPoint: number) =>
      client.request<{ status: string; workspace_id: string; parent_workspace_id: string; fork_point_task_count: number }>('POST', `/workspaces/${e(id)}/fork`, { body: { fork_point_task_count: forkPoint } }),
    async files(id: string): Promise<SnapshotFileEntry[]> {
      return (await client.request<{ entries: SnapshotFileEntry[] }>('GET', `/workspaces/${e(id)}/snapshot/files`)).entries
    },
  }
}
