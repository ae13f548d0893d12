import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { workspacesApi, type TaskRecord } from '../../client/index.js'

export default class TaskCancel extends ApiCommand<TaskRecord> {
  static override summary = 'Cancel a task: a queued one ends at once, a running one also stops its agent.'
  static override examples = ['<%= config.bin %> task cancel task_0193…']
  static override args = { id: Args.string({ required: true, description: 'Task id.' }) }

  async execute(): Promise<TaskRecord> {
    const { args } = await this.parse(TaskCancel)
    return workspacesApi(this.client).cancelTask(args.id)
  }

  protected override render(t: TaskRecord): void {
    process.stdout.write(`Task ${t.id} ${t.status}${t.reason ? ` (${t.reason})` : ''}\n`)
  }
}
