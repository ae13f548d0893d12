import { Flags } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { UsageError } from '../../cli/errors.js'
import { readRoleFile } from '../../cli/role-file.js'
import { asUsage, details, failWithDiagnostics, printRoleWarnings, ROLE_FIELDS } from '../../cli/role-output.js'
import { packsApi, rolesApi, type AgentRoleRecord } from '../../client/index.js'

export default class RoleCreate extends ApiCommand<AgentRoleRecord> {
  static override summary = 'Create an agent role from a role.yaml file.'
  static override description =
    'The file holds the role fields (docs/roles.md); `provider:` takes a provider name and `capabilities_file:` a caps.yaml path relative to the role file. The server compiles the capabilities; if they do not compile, the diagnostics are printed like `caps lint` and the command exits 1.'
  static override examples = ['<%= config.bin %> role create -f roles/coder.yaml']
  static override flags = { file: Flags.string({ char: 'f', summary: 'The role.yaml file.', required: true }) }

  async execute(): Promise<AgentRoleRecord> {
    const { flags } = await this.parse(RoleCreate)
    const role = await readRoleFile(flags.file).catch(asUsage)
    if (!role.body.name) throw new UsageError(`${flags.file}: name is required`)
    const api = rolesApi(this.client)
    if (role.provider) role.body.provider_id = (await api.resolveProvider(role.provider)).id
    if (role.packs) role.body.pack_ids = await packsApi(this.client).resolvePackIds(role.packs)
    if (!role.body.provider_id) throw new UsageError(`${flags.file}: provider (a provider name) or provider_id is required`)
    return printRoleWarnings(await api.createRole(role.body).catch((err) => failWithDiagnostics(err, role.capabilities, this.jsonEnabled())))
  }

  protected override render(r: AgentRoleRecord): void {
    process.stdout.write(`Agent role ${r.name} created.\n${details(r, ROLE_FIELDS.filter((f) => f !== 'capabilities'))}`)
  }
}
