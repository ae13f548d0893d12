import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { UsageError } from '../../cli/errors.js'
import { taskTable } from '../../cli/workspace-output.js'
import { workspacesApi, type TaskRecord } from '../../client/index.js'
import { TASK_STATUSES } from '../../contract/index.js'

const STATUSES = TASK_STATUSES

export default class TaskList extends ApiCommand<TaskRecord[]> {
  static override summary = 'List tasks, newest first: of one workspace (--workspace), or of every workspace you can see.'
  static override description = 'Without --workspace it reads the workspaces you can see (GET /v1/workspaces, with --state / --role narrowing them) and the tasks of each (GET /v1/workspaces/{id}/tasks); the API has no org-wide task listing. --limit caps the rows printed.'
  static override examples = [
    '<%= config.bin %> task list',
    '<%= config.bin %> task list --workspace ws_0193… --json',
    '<%= config.bin %> task list --status running,submitted',
  ]
  static override flags = {
    workspace: Flags.string({ char: 'w', helpValue: 'ID', summary: 'Only the tasks of this workspace.' }),
    status: Flags.string({ helpValue: 'STATUSES', summary: `Only these statuses (comma-separated: ${STATUSES.join(', ')}).` }),
    state: Flags.string({ helpValue: 'STATES', summary: 'Without --workspace: only workspaces in these states (as `workspace list --state`).', exclusive: ['workspace'] }),
    role: Flags.string({ helpValue: 'NAME', summary: 'Without --workspace: only workspaces of this role.', exclusive: ['workspace'] }),
    limit: Flags.integer({ min: 1, max: 10_000, default: 100, summary: 'At most this many tasks.' }),
  }

  async execute(): Promise<TaskRecord[]> {
    const { flags } = await this.parse(TaskList)
    const statuses = flags.status?.split(',').map((s) => s.trim()).filter(Boolean)
    const bad = statuses?.find((s) => !(STATUSES as readonly string[]).includes(s))
    if (bad) throw new UsageError(`--status: unknown status ${bad} (one of ${STATUSES.join(', ')}) (see --help)`)
    const api = workspacesApi(this.client)
    const workspaceIds = flags.workspace
      ? [flags.workspace]
      : (await api.listWorkspaces({ ...(flags.state ? { state: flags.state } : {}), ...(flags.role ? { role: flags.role } : {}) })).map((w) => w.id)
    const tasks: TaskRecord[] = []
    // A few workspaces at a time: bounded load on the server, a short wait for people.
    for (let i = 0; i < workspaceIds.length; i += 8) {
      const pages = await Promise.all(workspaceIds.slice(i, i + 8).map((id) => api.workspaceTasks(id)))
      for (const page of pages) tasks.push(...page)
    }
    return tasks
      .filter((t) => !statuses || statuses.includes(t.status))
      .sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : a.id < b.id ? 1 : -1))
      .slice(0, flags.limit)
  }

  protected override render(rows: TaskRecord[]): void {
    process.stdout.write(rows.length ? taskTable(rows) : 'No tasks.\n')
  }
}
