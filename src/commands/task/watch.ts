import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { diag } from '../../cli/output.js'
import { followTaskToEnd } from '../../cli/task-follow.js'
import { workspacesApi } from '../../client/index.js'

export default class TaskWatch extends ApiCommand<undefined> {
  static override summary = "Re-attach to a task's live view (after Ctrl-C on `task submit --wait`), or replay a finished one."
  static override description = "Shows the task's events from its start — agent events and each policy decision (allow or deny with its reason, destination, capability, debits) — then follows the workspace's activity stream until the task ends. Same view as `task submit --wait`; exits 1 unless the task completed. With --json: NDJSON, every event, then the final task."
  static override examples = ['<%= config.bin %> task watch task_0193…', '<%= config.bin %> task watch task_0193… --json | jq -c "select(.event_type == \\"policy_decision\\")"']
  static override args = { id: Args.string({ required: true, description: 'Task id.' }) }

  async execute(): Promise<undefined> {
    const { args } = await this.parse(TaskWatch)
    const task = await workspacesApi(this.client).getTask(args.id)
    const json = this.jsonEnabled()
    if (!json) diag(`Watching task ${task.id} on workspace ${task.workspace_id} (${task.status}); Ctrl-C stops watching, the task goes on.`)
    await followTaskToEnd(this.client, { taskId: task.id, workspaceId: task.workspace_id }, json)
    return undefined
  }
}
