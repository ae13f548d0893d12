// Saved connection profiles: `$XDG_CONFIG_HOME/corral/config.json` (default ~/.config), written by
// `corral login`. The file holds tokens, so it is created 0600 inside a 0700 directory and replaced
// atomically (write to a temp file, then rename) so a crash never leaves half a config behind.

import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { CliError } from './errors.js'

export interface Profile {
  api_url: string
  token: string
  /** The org the token belongs to, when the server told us at login. */
  org_id?: string
}

export interface ProfileConfig {
  current?: string
  profiles: Record<string, Profile>
}

export const DEFAULT_PROFILE = 'default'

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME.startsWith('/') ? env.XDG_CONFIG_HOME : join(homedir(), '.config')
  return join(base, 'corral', 'config.json')
}

export function readConfig(path = configPath()): ProfileConfig {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { profiles: {} }
    throw new CliError(`cannot read ${path}: ${(error as Error).message}`, 'config_unreadable')
  }
  try {
    const parsed = JSON.parse(text) as ProfileConfig
    if (typeof parsed !== 'object' || parsed === null || typeof parsed.profiles !== 'object') throw new Error('no "profiles" object')
    return parsed
  } catch (error) {
    throw new CliError(`${path} is not a valid corral config (${(error as Error).message}); fix or delete it`, 'config_invalid')
  }
}

export function writeConfig(config: ProfileConfig, path = configPath()): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  const tmp = `${path}.${process.pid}.tmp`
  writeFileSync(tmp, JSON.stringify(config, null, 2) + '\n', { mode: 0o600 })
  chmodSync(tmp, 0o600) // the mode option does not apply when the file already existed
  renameSync(tmp, path)
}

/** The profile a command should use: the named one (it must exist), else the current one, if any. */
export function selectProfile(config: ProfileConfig, name?: string): { name: string; profile: Profile } | undefined {
  if (name !== undefined) {
    const profile = config.profiles[name]
    if (!profile) {
      const known = Object.keys(config.profiles)
      throw new CliError(
        `profile "${name}" not found (${known.length ? `known: ${known.join(', ')}` : 'none saved; run `corral login`'})`,
        'profile_not_found',
      )
    }
    return { name, profile }
  }
  const current = config.current ?? (config.profiles[DEFAULT_PROFILE] ? DEFAULT_PROFILE : undefined)
  if (current && config.profiles[current]) return { name: current, profile: config.profiles[current] }
  return undefined
}
