import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { resolveCredential } from '../../cli/credential-output.js'

export default class CredentialDelete extends ApiCommand<{ id: string; status: string }> {
  static override summary = 'Delete a credential; auth transforms naming it then record auth_unavailable.'
  static override description = 'By id, or by name when exactly one credential you can see has it. With auth:write:own only your own personal credentials can be deleted.'
  static override examples = ['<%= config.bin %> credential delete cred_0193…', '<%= config.bin %> credential delete github-bot']
  static override args = { id: Args.string({ required: true, description: 'Credential id or name.' }) }

  async execute(): Promise<{ id: string; status: string }> {
    const { args } = await this.parse(CredentialDelete)
    const id = args.id.startsWith('cred_') ? args.id : (await resolveCredential(this.client, args.id)).id
    const r = await this.client.request<{ status: string }>('DELETE', `/credentials/${encodeURIComponent(id)}`)
    return { id, status: r.status }
  }

  protected override render(r: { id: string }): void {
    process.stdout.write(`Credential ${r.id} deleted.\n`)
  }
}
