import * as Args from '@oclif/core/args'
import { ApiCommand } from '../../cli/api-command.js'

export interface RevokeResult {
  id: string
  status: 'revoked'
}

export default class KeysRevoke extends ApiCommand<RevokeResult> {
  static override summary = 'Revoke an API key; requests with its secret get 401 at once.'
  static override examples = ['<%= config.bin %> keys revoke key_01J…']
  static override args = { id: Args.string({ required: true, description: 'Id of the key (see `keys list`).' }) }

  async execute(): Promise<RevokeResult> {
    const { args } = await this.parse(KeysRevoke)
    const result = await this.client.revokeApiKey(args.id)
    return { id: args.id, status: result?.status ?? 'revoked' }
  }

  protected override render(result: RevokeResult): void {
    process.stdout.write(`Revoked ${result.id}.\n`)
  }
}
