import { Args, Flags } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { PROVIDER_KINDS } from '../../contract/index.js'
import { UsageError } from '../../cli/errors.js'
import { details, PROVIDER_FIELDS } from '../../cli/role-output.js'
import { rolesApi, type ProviderInput, type ProviderRecord } from '../../client/index.js'

export default class ProviderUpdate extends ApiCommand<ProviderRecord> {
  static override summary = 'Change some fields of a provider; idle workspaces of its roles restart to pick it up.'
  static override description = 'Only the flags given are sent. An empty value clears an optional field (--default-model "").'
  static override examples = ['<%= config.bin %> provider update claude --default-model claude-opus-4-1']
  static override args = { provider: Args.string({ required: true, description: 'Provider name or id.' }) }
  static override flags = {
    name: Flags.string({ summary: 'Rename the provider.' }),
    kind: Flags.string({ summary: 'Wire format of the provider API.', options: [...PROVIDER_KINDS] }),
    domain: Flags.string({ summary: 'Hostname the provider API lives on.' }),
    'base-url': Flags.string({ summary: 'https base URL (moves the domain with it unless --domain is given).' }),
    'default-model': Flags.string({ summary: 'Model used by roles that do not name one.' }),
    'display-name': Flags.string({ summary: 'Human-friendly name.' }),
    description: Flags.string({ summary: 'Free text.' }),
  }

  async execute(): Promise<ProviderRecord> {
    const { args, flags } = await this.parse(ProviderUpdate)
    const orNull = (v: string | undefined) => (v === undefined ? undefined : v === '' ? null : v)
    const body: ProviderInput = {
      name: flags.name,
      kind: flags.kind as ProviderInput['kind'],
      domain: flags.domain,
      base_url: orNull(flags['base-url']),
      default_model: orNull(flags['default-model']),
      display_name: orNull(flags['display-name']),
      description: orNull(flags.description),
    }
    for (const k of Object.keys(body) as (keyof ProviderInput)[]) if (body[k] === undefined) delete body[k]
    if (Object.keys(body).length === 0) throw new UsageError('nothing to change: give at least one field flag')
    const api = rolesApi(this.client)
    const current = await api.resolveProvider(args.provider)
    return api.updateProvider(current.id, body)
  }

  protected override render(p: ProviderRecord): void {
    process.stdout.write(`Provider ${p.name} updated.\n${details(p, PROVIDER_FIELDS)}`)
  }
}
