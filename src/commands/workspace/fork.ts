import { Args } from '@oclif/core'
import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { workspacesApi } from '../../client/index.js'

type Result = Awaited<ReturnType<ReturnType<typeof workspacesApi>['fork']>>

export default class WorkspaceFork extends ApiCommand<Result> {
  static override summary = 'Fork a workspace from the snapshot taken after N completed tasks (0: empty).'
  static override description = 'The new workspace belongs to you and starts provisioning; the parent is unchanged. A busy parent is refused (invalid_state).'
  static override examples = ['<%= config.bin %> workspace fork ws_0193… --at 1']
  static override args = { id: Args.string({ required: true, description: 'Parent workspace id.' }) }
  static override flags = { at: Flags.integer({ min: 0, required: true, helpValue: 'N', summary: 'fork_point_task_count: tasks completed in the parent at the snapshot.' }) }

  async execute(): Promise<Result> {
    const { args, flags } = await this.parse(WorkspaceFork)
    return workspacesApi(this.client).fork(args.id, flags.at)
  }

  protected override render(r: Result): void {
    process.stdout.write(`Workspace ${r.workspace_id} forked from ${r.parent_workspace_id} at ${r.fork_point_task_count} tasks (${r.status})\n`)
  }
}
