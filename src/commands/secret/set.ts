import { Args, Flags } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { UsageError } from '../../cli/errors.js'

export interface SecretMeta { name: string; created_at: string; updated_at: string }

export default class SecretSet extends ApiCommand<SecretMeta> {
  static override summary = 'Create or replace an org secret (readable only by proxy transforms as secrets["NAME"]).'
  static override description = 'The value is read from --value-stdin (recommended: it stays out of shell history) or --value. It is stored encrypted and never shown again.'
  static override examples = ['printf %s "$OPENAI_KEY" | <%= config.bin %> secret set openai_key --value-stdin']
  static override args = { name: Args.string({ required: true, description: 'Secret name ([A-Za-z][A-Za-z0-9_.-]{0,63}).' }) }
  static override flags = {
    value: Flags.string({ summary: 'The value (visible in shell history; prefer --value-stdin).', exclusive: ['value-stdin'] }),
    'value-stdin': Flags.boolean({ summary: 'Read the value from standard input (one trailing newline is dropped).' }),
  }

  async execute(): Promise<SecretMeta> {
    const { args, flags } = await this.parse(SecretSet)
    let value = flags.value
    if (flags['value-stdin']) {
      const chunks: Buffer[] = []
      for await (const c of process.stdin) chunks.push(c as Buffer)
      value = Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '')
    }
    if (!value) throw new UsageError('give the value with --value-stdin or --value')
    return this.client.request<SecretMeta>('POST', '/secrets', { body: { name: args.name, value } })
  }

  protected override render(s: SecretMeta): void {
    process.stdout.write(`Secret ${s.name} saved (${s.updated_at}).\n`)
  }
}
