import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'

export default class CredentialDelete extends ApiCommand<{ id: string; status: string }> {
  static override summary = 'Delete a credential; auth transforms naming it then record auth_unavailable.'
  static override examples = ['<%= config.bin %> credential delete cred_0193…']
  static override args = { id: Args.string({ required: true }) }

  async execute(): Promise<{ id: string; status: string }> {
    const { args } = await this.parse(CredentialDelete)
    const r = await this.client.request<{ status: string }>('DELETE', `/credentials/${encodeURIComponent(args.id)}`)
    return { id: args.id, status: r.status }
  }

  protected override render(r: { id: string }): void {
    process.stdout.write(`Credential ${r.id} deleted.\n`)
  }
}
