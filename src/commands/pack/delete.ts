import * as Args from '@oclif/core/args'
import { ApiCommand } from '../../cli/api-command.js'
import { ApiError, packsApi, rolesApi } from '../../client/index.js'

interface Result { id: string; name: string; status: 'deleted' }

export default class PackDelete extends ApiCommand<Result> {
  static override summary = 'Delete a pack this org owns; refused (pack_in_use) while a role that is not archived attaches it.'
  static override description = 'The refusal names the roles of this org that attach the pack: detach it (role update) or archive them first.'
  static override examples = ['<%= config.bin %> pack delete hello-pack']
  static override args = { pack: Args.string({ required: true, description: 'Pack name or id.' }) }

  async execute(): Promise<Result> {
    const { args } = await this.parse(PackDelete)
    const api = packsApi(this.client)
    const p = await api.resolvePack(args.pack)
    try {
      return { id: p.id, name: p.name, ...(await api.deletePack(p.id)) }
    } catch (err) {
      throw await this.#withRoleNames(err)
    }
  }

  /** pack_in_use carries role ids; people need the names to act on, so they go into the one line. */
  async #withRoleNames(err: unknown): Promise<unknown> {
    if (!(err instanceof ApiError) || err.code !== 'pack_in_use' || !Array.isArray(err.envelope.details?.roles) || err.envelope.details.roles.length === 0) return err
    const ids = err.envelope.details.roles as string[]
    const roles = await rolesApi(this.client).listRoles().catch(() => [])
    const names = ids.map((id) => roles.find((r) => r.id === id)?.name ?? id)
    return new ApiError(err.status, { ...err.envelope, message: `${err.envelope.message} (roles: ${names.join(', ')})` }, err.retryAfter)
  }

  protected override render(r: Result): void {
    process.stdout.write(`Pack ${r.name} deleted.\n`)
  }
}
