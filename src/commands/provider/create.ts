import { Args, Flags } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { PROVIDER_KINDS, type ProviderKind } from '../../contract/index.js'
import { details, PROVIDER_FIELDS } from '../../cli/role-output.js'
import { rolesApi, type ProviderRecord } from '../../client/index.js'

export default class ProviderCreate extends ApiCommand<ProviderRecord> {
  static override summary = 'Create a model provider that agent roles can use.'
  static override description = 'kind anthropic speaks the Messages API; openai speaks OpenAI-compatible Chat Completions. Give --base-url (https) or --domain; the domain is derived from the URL when omitted.'
  static override examples = [
    '<%= config.bin %> provider create claude --kind anthropic --base-url https://api.anthropic.com --default-model claude-sonnet-4-5',
    '<%= config.bin %> provider create local-llm --kind openai --base-url https://llm.internal.example/v1',
  ]
  static override args = { name: Args.string({ required: true, description: 'Provider name (letter first; letters, digits, _ and -).' }) }
  static override flags = {
    kind: Flags.string({ summary: 'Wire format of the provider API.', options: [...PROVIDER_KINDS], required: true }),
    domain: Flags.string({ summary: 'Hostname the provider API lives on.' }),
    'base-url': Flags.string({ summary: 'https base URL of the provider API.' }),
    'default-model': Flags.string({ summary: 'Model used by roles that do not name one.' }),
    'display-name': Flags.string({ summary: 'Human-friendly name.' }),
    description: Flags.string({ summary: 'Free text.' }),
  }

  async execute(): Promise<ProviderRecord> {
    const { args, flags } = await this.parse(ProviderCreate)
    return rolesApi(this.client).createProvider({
      name: args.name,
      kind: flags.kind as ProviderKind,
      domain: flags.domain,
      base_url: flags['base-url'],
      default_model: flags['default-model'],
      display_name: flags['display-name'],
      description: flags.description,
    })
  }

  protected override render(p: ProviderRecord): void {
    process.stdout.write(`Provider ${p.name} created.\n${details(p, PROVIDER_FIELDS)}`)
  }
}
