import { CorralCommand } from '../../cli/base-command.js'
import { table } from '../../cli/output.js'
import { readConfig } from '../../cli/profiles.js'

export interface ProfileRow {
  name: string
  current: boolean
  api_url: string
  org_id?: string
}

export default class ProfileList extends CorralCommand<ProfileRow[]> {
  static override summary = 'List saved profiles (tokens are never shown).'
  static override examples = ['<%= config.bin %> profile list', '<%= config.bin %> profile list --json']

  async execute(): Promise<ProfileRow[]> {
    await this.parse(ProfileList)
    const config = readConfig()
    return Object.entries(config.profiles).map(([name, p]) => ({
      name,
      current: name === config.current,
      api_url: p.api_url,
      ...(p.org_id ? { org_id: p.org_id } : {}),
    }))
  }

  protected override render(rows: ProfileRow[]): void {
    process.stdout.write(
      table(rows, [
        { header: ' ', get: (r) => (r.current ? '*' : '') },
        { header: 'name', get: (r) => r.name },
        { header: 'api_url', get: (r) => r.api_url },
        { header: 'org_id', get: (r) => r.org_id },
      ]),
    )
  }
}
