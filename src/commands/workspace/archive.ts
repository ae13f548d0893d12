import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { workspacesApi, type WorkspaceRecord } from '../../client/index.js'

export default class WorkspaceArchive extends ApiCommand<WorkspaceRecord> {
  static override summary = 'Archive a workspace (stopping it first); follow-up tasks are refused until it is unarchived.'
  static override examples = ['<%= config.bin %> workspace archive ws_0193…']
  static override args = { id: Args.string({ required: true, description: 'Workspace id.' }) }

  async execute(): Promise<WorkspaceRecord> {
    const { args } = await this.parse(WorkspaceArchive)
    return (await workspacesApi(this.client).archive(args.id)).workspace
  }

  protected override render(w: WorkspaceRecord): void {
    process.stdout.write(`Workspace ${w.id} is ${w.state}\n`)
  }
}
