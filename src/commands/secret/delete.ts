import { Args } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'

export default class SecretDelete extends ApiCommand<{ name: string; status: string }> {
  static override summary = 'Delete an org secret; transforms that read it then record apply_error.'
  static override examples = ['<%= config.bin %> secret delete openai_key']
  static override args = { name: Args.string({ required: true }) }

  async execute(): Promise<{ name: string; status: string }> {
    const { args } = await this.parse(SecretDelete)
    const r = await this.client.request<{ status: string }>('DELETE', `/secrets/${encodeURIComponent(args.name)}`)
    return { name: args.name, status: r.status }
  }

  protected override render(r: { name: string }): void {
    process.stdout.write(`Secret ${r.name} deleted.\n`)
  }
}
