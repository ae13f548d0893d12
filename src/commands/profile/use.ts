import * as Args from '@oclif/core/args'
import { CorralCommand } from '../../cli/base-command.js'
import { readConfig, selectProfile, writeConfig } from '../../cli/profiles.js'

export default class ProfileUse extends CorralCommand<{ current: string }> {
  static override summary = 'Make a saved profile the current one.'
  static override examples = ['<%= config.bin %> profile use staging', 'CORRAL_PROFILE=staging <%= config.bin %> workspace list    # one command only, the current profile stays']
  static override args = { name: Args.string({ required: true, description: 'Profile name.' }) }

  async execute(): Promise<{ current: string }> {
    const { args } = await this.parse(ProfileUse)
    const config = readConfig()
    selectProfile(config, args.name) // throws profile_not_found with the known names
    config.current = args.name
    writeConfig(config)
    return { current: args.name }
  }

  protected override render(r: { current: string }): void {
    process.stdout.write(`Now using profile "${r.current}".\n`)
  }
}
