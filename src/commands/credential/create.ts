import { Args, Flags } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { readStdinSecret, type CredentialMeta } from '../../cli/credential-output.js'
import { UsageError } from '../../cli/errors.js'

export type { CredentialMeta } from '../../cli/credential-output.js'

const OAUTH_FLAGS = ['issuer', 'authorization-url', 'token-url', 'client-id', 'client-secret-stdin', 'scope'] as const
const STATIC_FLAGS = ['username', 'secret', 'secret-stdin'] as const

export default class CredentialCreate extends ApiCommand<CredentialMeta> {
  static override summary = 'Create a credential for auth transforms: static token, basic auth, query key or OAuth; org-wide or --personal.'
  static override description = [
    'Static kinds: the secret part is read from standard input (--secret-stdin) or --secret: the token for static_token and query_key, the password for basic_auth.',
    'OAuth (--kind oauth): the client id, the client secret from standard input (--client-secret-stdin), the provider from OpenID Connect discovery of --issuer or from --authorization-url and --token-url, and the scopes; the credential starts pending until `corral credential authorize` completes consent.',
    'Material is stored encrypted and injected by the proxy at the provider\'s documented place; it is never shown again.',
    '--personal makes it yours (auth:write:own is enough): in workspaces you create, your personal credential of a name is used instead of the org\'s (docs/credentials.md).',
  ].join(' ')
  static override examples = [
    'printf %s "$GH_TOKEN" | <%= config.bin %> credential create github-bot --provider github --kind static_token --secret-stdin',
    'printf %s "$JIRA_TOKEN" | <%= config.bin %> credential create jira --provider jira --kind basic_auth --username bot@example.com --secret-stdin',
    'printf %s "$MY_GH_TOKEN" | <%= config.bin %> credential create github-bot --provider github --kind static_token --secret-stdin --personal',
    'printf %s "$CLIENT_SECRET" | <%= config.bin %> credential create gmail --provider google --kind oauth --issuer https://accounts.google.com --client-id 123.apps.googleusercontent.com --client-secret-stdin --scope openid --scope https://www.googleapis.com/auth/gmail.readonly',
  ]
  static override args = { name: Args.string({ required: true, description: 'Credential name, referenced by auth transforms.' }) }
  static override flags = {
    provider: Flags.string({ summary: 'Auth-provider slug (see docs/credentials.md).', required: true }),
    kind: Flags.string({ summary: 'Credential kind.', required: true, options: ['static_token', 'basic_auth', 'query_key', 'oauth'] }),
    personal: Flags.boolean({ summary: 'Your personal credential instead of an org-wide one.' }),
    username: Flags.string({ summary: 'Username (basic_auth only).' }),
    secret: Flags.string({ summary: 'Token or password (visible in shell history; prefer --secret-stdin).', exclusive: ['secret-stdin'] }),
    'secret-stdin': Flags.boolean({ summary: 'Read the token or password from standard input.' }),
    issuer: Flags.string({ summary: 'OAuth: the OpenID Connect issuer URL (endpoints by discovery).', helpValue: 'URL' }),
    'authorization-url': Flags.string({ summary: 'OAuth without discovery: the authorization endpoint.', helpValue: 'URL' }),
    'token-url': Flags.string({ summary: 'OAuth without discovery: the token endpoint.', helpValue: 'URL' }),
    'client-id': Flags.string({ summary: 'OAuth: the client id registered with the provider.' }),
    'client-secret-stdin': Flags.boolean({ summary: 'OAuth: read the client secret from standard input.' }),
    scope: Flags.string({ summary: 'OAuth: a scope to request (repeatable; spaces or commas also separate).', multiple: true }),
  }

  async execute(): Promise<CredentialMeta> {
    const { args, flags } = await this.parse(CredentialCreate)
    const oauth = flags.kind === 'oauth'
    const stray = (oauth ? STATIC_FLAGS : OAUTH_FLAGS).filter((f) => flags[f] !== undefined && flags[f] !== false)
    if (stray.length > 0) throw new UsageError(`--${stray[0]} does not apply to --kind ${flags.kind}`)
    const base = { name: args.name, provider: flags.provider, kind: flags.kind, ...(flags.personal ? { personal: true } : {}) }
    const body = oauth ? await oauthBody(flags) : await staticBody(flags)
    return this.client.request<CredentialMeta>('POST', '/credentials', { body: { ...base, ...body } })
  }

  protected override render(c: CredentialMeta): void {
    const whose = c.owner_user_id ? 'personal' : 'org'
    const next = c.status === 'active' ? '' : ` Status ${c.status}: run \`corral credential authorize ${c.name}\` to complete consent.`
    process.stdout.write(`Credential ${c.name} (${c.id}, ${whose}) created for ${c.provider} [${c.kind}].${next}\n`)
  }
}

async function staticBody(flags: { kind: string; username?: string; secret?: string; 'secret-stdin': boolean }): Promise<Record<string, unknown>> {
  const secret = flags['secret-stdin'] ? await readStdinSecret() : flags.secret
  if (!secret) throw new UsageError('give the token or password with --secret-stdin or --secret')
  return flags.kind === 'basic_auth' ? { username: flags.username ?? '', password: secret } : { token: secret }
}

async function oauthBody(flags: {
  issuer?: string; 'authorization-url'?: string; 'token-url'?: string; 'client-id'?: string; 'client-secret-stdin': boolean; scope?: string[]
}): Promise<Record<string, unknown>> {
  if (!flags['client-id']) throw new UsageError('--kind oauth needs --client-id')
  if (!flags['client-secret-stdin']) throw new UsageError('--kind oauth needs the client secret on standard input (--client-secret-stdin)')
  const explicit = flags['authorization-url'] !== undefined || flags['token-url'] !== undefined
  if (flags.issuer && explicit) throw new UsageError('give --issuer (discovery) or --authorization-url with --token-url, not both')
  if (!flags.issuer && !(flags['authorization-url'] && flags['token-url'])) throw new UsageError('--kind oauth needs --issuer, or both --authorization-url and --token-url')
  const clientSecret = await readStdinSecret()
  if (!clientSecret) throw new UsageError('the client secret on standard input is empty')
  const scopes = (flags.scope ?? []).flatMap((s) => s.split(/[\s,]+/)).filter((s) => s !== '')
  return {
    client_id: flags['client-id'], client_secret: clientSecret,
    ...(flags.issuer ? { issuer: flags.issuer } : { authorization_url: flags['authorization-url'], token_url: flags['token-url'] }),
    ...(scopes.length > 0 ? { scopes } : {}),
  }
}
