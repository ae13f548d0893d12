import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { recordLines, taskTable, WORKSPACE_FIELDS } from '../../cli/workspace-output.js'
import { workspacesApi, type TaskRecord, type WorkspaceRecord } from '../../client/index.js'

type Result = WorkspaceRecord & { tasks: TaskRecord[] }

export default class WorkspaceShow extends ApiCommand<Result> {
  static override summary = 'Show one workspace and its tasks.'
  static override examples = ['<%= config.bin %> workspace show ws_0193…']
  static override args = { id: Args.string({ required: true, description: 'Workspace id.' }) }

  async execute(): Promise<Result> {
    const { args } = await this.parse(WorkspaceShow)
    const api = workspacesApi(this.client)
    const [ws, tasks] = await Promise.all([api.getWorkspace(args.id), api.workspaceTasks(args.id)])
    return { ...ws, tasks }
  }

  protected override render(r: Result): void {
    process.stdout.write(recordLines(r, WORKSPACE_FIELDS))
    if (r.tasks.length) process.stdout.write(`\n${taskTable(r.tasks)}`)
  }
}
