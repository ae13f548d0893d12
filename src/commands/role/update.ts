import { Args, Flags } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { UsageError } from '../../cli/errors.js'
import { readRoleFile } from '../../cli/role-file.js'
import { asUsage, details, failWithDiagnostics, printRoleWarnings, ROLE_FIELDS } from '../../cli/role-output.js'
import { packsApi, rolesApi, type AgentRoleRecord } from '../../client/index.js'

export default class RoleUpdate extends ApiCommand<AgentRoleRecord> {
  static override summary = 'Update an agent role from a role.yaml file; idle workspaces restart to pick it up.'
  static override description =
    'Only the keys present in the file change (pack_ids replaces the whole list when present). The role is the one named by the argument, else the file\'s `name`; with an argument, a different `name` in the file renames the role. Archived roles are refused (role_archived).'
  static override examples = ['<%= config.bin %> role update -f roles/coder.yaml', '<%= config.bin %> role update coder -f patch.yaml']
  static override args = { role: Args.string({ description: 'Role name or id (default: the file\'s name).' }) }
  static override flags = { file: Flags.string({ char: 'f', summary: 'The role.yaml file (all keys optional).', required: true }) }

  async execute(): Promise<AgentRoleRecord> {
    const { args, flags } = await this.parse(RoleUpdate)
    const role = await readRoleFile(flags.file).catch(asUsage)
    const ref = args.role ?? role.body.name
    if (!ref) throw new UsageError('name the role: give it as an argument or put `name:` in the file')
    const api = rolesApi(this.client)
    const current = await api.resolveRole(ref)
    if (role.provider) role.body.provider_id = (await api.resolveProvider(role.provider)).id
    if (role.packs) role.body.pack_ids = await packsApi(this.client).resolvePackIds(role.packs)
    // Sending the unchanged name would only add noise to patched_fields.
    if (role.body.name === current.name) delete role.body.name
    if (Object.keys(role.body).length === 0) throw new UsageError(`${flags.file}: nothing to change`)
    return printRoleWarnings(await api.updateRole(current.id, role.body).catch((err) => failWithDiagnostics(err, role.capabilities, this.jsonEnabled())))
  }

  protected override render(r: AgentRoleRecord): void {
    process.stdout.write(`Agent role ${r.name} updated.\n${details(r, ROLE_FIELDS.filter((f) => f !== 'capabilities'))}`)
  }
}
