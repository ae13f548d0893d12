import * as Flags from '@oclif/core/flags'
import { CorralCommand } from '../cli/base-command.js'
import { ENV } from '../cli/connection.js'
import { CliError } from '../cli/errors.js'
import { configPath, readConfig, selectProfile, writeConfig } from '../cli/profiles.js'

export interface LogoutResult {
  removed: string
  api_url: string
  config_path: string
  /** The profile that is current afterwards, if any is. */
  current?: string
}

export default class Logout extends CorralCommand<LogoutResult> {
  static override summary = 'Forget a saved profile and its token (the current one unless --profile names another).'
  static override description = 'Deletes the profile from $XDG_CONFIG_HOME/corral/config.json. Nothing is sent to the server: an API key stays valid until `corral keys revoke` (the key is not yours to revoke by logging out). When the removed profile was current, no profile is current afterwards; pick one with `corral profile use`.'
  static override examples = ['<%= config.bin %> logout', '<%= config.bin %> logout --profile staging']
  static override flags = {
    profile: Flags.string({ helpValue: 'NAME', summary: 'The profile to forget [env: CORRAL_PROFILE] (default: the current one).' }),
  }

  async execute(): Promise<LogoutResult> {
    const { flags } = await this.parse(Logout)
    const config = readConfig()
    const chosen = flags.profile || process.env[ENV.profile] || undefined
    const selected = selectProfile(config, chosen)
    if (!selected) throw new CliError('not logged in: no current profile to forget (see `corral profile list`)', 'not_logged_in')
    delete config.profiles[selected.name]
    if (config.current === selected.name) delete config.current
    writeConfig(config)
    const after = selectProfile(config)
    return { removed: selected.name, api_url: selected.profile.api_url, config_path: configPath(), ...(after ? { current: after.name } : {}) }
  }

  protected override render(r: LogoutResult): void {
    process.stdout.write(`Logged out: removed profile "${r.removed}" (${r.api_url}) from ${r.config_path}.${r.current ? ` Current profile: "${r.current}".` : ''}\n`)
  }
}
