import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { credentialDetails, resolveCredential, type CredentialMeta } from '../../cli/credential-output.js'

export default class CredentialShow extends ApiCommand<CredentialMeta> {
  static override summary = 'Show one credential (metadata only: status, owner, provider; never the material).'
  static override description = 'By id, or by name when exactly one credential you can see has it (an org credential and personal ones may share a name; then give the id).'
  static override examples = ['<%= config.bin %> credential show github-bot', '<%= config.bin %> credential show cred_0193… --json']
  static override args = { credential: Args.string({ required: true, description: 'Credential name or id.' }) }

  async execute(): Promise<CredentialMeta> {
    const { args } = await this.parse(CredentialShow)
    return resolveCredential(this.client, args.credential)
  }

  protected override render(c: CredentialMeta): void {
    process.stdout.write(credentialDetails(c))
  }
}
