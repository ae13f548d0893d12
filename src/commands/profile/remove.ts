import * as Args from '@oclif/core/args'
import { CorralCommand } from '../../cli/base-command.js'
import { readConfig, selectProfile, writeConfig } from '../../cli/profiles.js'

export default class ProfileRemove extends CorralCommand<{ removed: string }> {
  static override summary = 'Delete a saved profile and its token from the config file.'
  static override examples = ['<%= config.bin %> profile remove staging']
  static override args = { name: Args.string({ required: true, description: 'Profile name.' }) }

  async execute(): Promise<{ removed: string }> {
    const { args } = await this.parse(ProfileRemove)
    const config = readConfig()
    selectProfile(config, args.name)
    delete config.profiles[args.name]
    if (config.current === args.name) delete config.current
    writeConfig(config)
    return { removed: args.name }
  }

  protected override render(r: { removed: string }): void {
    process.stdout.write(`Removed profile "${r.removed}".\n`)
  }
}
