import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { workspacesApi, type WorkspaceRecord } from '../../client/index.js'

export default class WorkspaceUnarchive extends ApiCommand<WorkspaceRecord> {
  static override summary = 'Unarchive a workspace; it lands in stopped and the next task restarts it.'
  static override examples = ['<%= config.bin %> workspace unarchive ws_0193…']
  static override args = { id: Args.string({ required: true, description: 'Workspace id.' }) }

  async execute(): Promise<WorkspaceRecord> {
    const { args } = await this.parse(WorkspaceUnarchive)
    return (await workspacesApi(this.client).unarchive(args.id)).workspace
  }

  protected override render(w: WorkspaceRecord): void {
    process.stdout.write(`Workspace ${w.id} is ${w.state}\n`)
  }
}
