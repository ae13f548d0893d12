import * as Flags from '@oclif/core/flags'
import { ApiCommand } from '../../cli/api-command.js'
import { workspaceTable } from '../../cli/workspace-output.js'
import { workspacesApi, type WorkspaceRecord } from '../../client/index.js'

export default class WorkspaceList extends ApiCommand<WorkspaceRecord[]> {
  static override summary = 'List workspaces, newest first.'
  static override examples = ['<%= config.bin %> workspace list --state idle,busy', '<%= config.bin %> workspace list --role coder --json']
  static override flags = {
    state: Flags.string({ helpValue: 'STATES', summary: 'Only these states (comma-separated: provisioning, idle, busy, stopping, stopped, archived).' }),
    role: Flags.string({ helpValue: 'NAME', summary: 'Only workspaces of this role (name or id).' }),
    creator: Flags.string({ helpValue: 'ID', summary: 'Only workspaces created by this user or API key id.' }),
  }

  async execute(): Promise<WorkspaceRecord[]> {
    const { flags } = await this.parse(WorkspaceList)
    return workspacesApi(this.client).listWorkspaces({ state: flags.state, role: flags.role, creator: flags.creator })
  }

  protected override render(rows: WorkspaceRecord[]): void {
    process.stdout.write(rows.length ? workspaceTable(rows) : 'No workspaces.\n')
  }
}
