import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { recordLines, TASK_FIELDS } from '../../cli/workspace-output.js'
import { workspacesApi, type TaskRecord } from '../../client/index.js'

export default class TaskShow extends ApiCommand<TaskRecord> {
  static override summary = 'Show one task: status, reason, summary, uploads.'
  static override examples = ['<%= config.bin %> task show task_0193…']
  static override args = { id: Args.string({ required: true, description: 'Task id.' }) }

  async execute(): Promise<TaskRecord> {
    const { args } = await this.parse(TaskShow)
    return workspacesApi(this.client).getTask(args.id)
  }

  protected override render(t: TaskRecord): void {
    process.stdout.write(recordLines(t, TASK_FIELDS))
  }
}
