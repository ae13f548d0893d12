import { Args, Flags } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { UsageError } from '../../cli/errors.js'

export interface CredentialMeta { id: string; name: string; provider: string; kind: string; status: string; created_at: string; updated_at: string }

export default class CredentialCreate extends ApiCommand<CredentialMeta> {
  static override summary = 'Create a static-token, basic-auth or query-key credential for auth transforms.'
  static override description = 'The secret part is read from standard input (--secret-stdin) or --secret: the token for static_token and query_key, the password for basic_auth. It is stored encrypted and injected by the proxy at the provider\'s documented place; it is never shown again.'
  static override examples = [
    'printf %s "$GH_TOKEN" | <%= config.bin %> credential create github-bot --provider github --kind static_token --secret-stdin',
    'printf %s "$JIRA_TOKEN" | <%= config.bin %> credential create jira --provider jira --kind basic_auth --username bot@example.com --secret-stdin',
  ]
  static override args = { name: Args.string({ required: true, description: 'Credential name, referenced by auth transforms.' }) }
  static override flags = {
    provider: Flags.string({ summary: 'Auth-provider slug (see docs/credentials.md).', required: true }),
    kind: Flags.string({ summary: 'Credential kind.', required: true, options: ['static_token', 'basic_auth', 'query_key'] }),
    username: Flags.string({ summary: 'Username (basic_auth only).' }),
    secret: Flags.string({ summary: 'Token or password (visible in shell history; prefer --secret-stdin).', exclusive: ['secret-stdin'] }),
    'secret-stdin': Flags.boolean({ summary: 'Read the token or password from standard input.' }),
  }

  async execute(): Promise<CredentialMeta> {
    const { args, flags } = await this.parse(CredentialCreate)
    let secret = flags.secret
    if (flags['secret-stdin']) {
      const chunks: Buffer[] = []
      for await (const c of process.stdin) chunks.push(c as Buffer)
      secret = Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '')
    }
    if (!secret) throw new UsageError('give the token or password with --secret-stdin or --secret')
    const body = flags.kind === 'basic_auth'
      ? { name: args.name, provider: flags.provider, kind: flags.kind, username: flags.username ?? '', password: secret }
      : { name: args.name, provider: flags.provider, kind: flags.kind, token: secret }
    return this.client.request<CredentialMeta>('POST', '/credentials', { body })
  }

  protected override render(c: CredentialMeta): void {
    process.stdout.write(`Credential ${c.name} (${c.id}) created for ${c.provider} [${c.kind}].\n`)
  }
}
