// Where an API command connects, and with which token. One rule, applied per value:
//
//   1. an explicit flag on the command line (--api-url, --token);
//   2. an explicitly chosen profile (--profile, or CORRAL_PROFILE);
//   3. the environment (CORRAL_API_URL, CORRAL_TOKEN);
//   4. the current saved profile (`corral profile use`, else the one named "default").
//
// A chosen profile outranks the environment on purpose: with CORRAL_TOKEN exported for a dev
// server, `--profile prod` must not send that dev token to prod's URL.

import { UsageError } from './errors.js'
import { type Profile, type ProfileConfig, selectProfile } from './profiles.js'

export const ENV = { apiUrl: 'CORRAL_API_URL', token: 'CORRAL_TOKEN', profile: 'CORRAL_PROFILE' } as const

export interface ConnectionFlags {
  apiUrl?: string
  token?: string
  profile?: string
}

export interface Connection {
  apiUrl: string
  token: string
  profileName?: string
  profile?: Profile
}

const nonEmpty = (v: string | undefined) => (v === undefined || v === '' ? undefined : v)

export function resolveConnection(flags: ConnectionFlags, env: NodeJS.ProcessEnv, loadConfig: () => ProfileConfig): Connection {
  const chosen = nonEmpty(flags.profile) ?? nonEmpty(env[ENV.profile])
  let apiUrl = nonEmpty(flags.apiUrl)
  let token = nonEmpty(flags.token)
  let selected: { name: string; profile: Profile } | undefined
  if (chosen !== undefined) {
    selected = selectProfile(loadConfig(), chosen) // an unknown name is an error, never a silent fallback
  } else {
    apiUrl ??= nonEmpty(env[ENV.apiUrl])
    token ??= nonEmpty(env[ENV.token])
    if (apiUrl === undefined || token === undefined) selected = selectProfile(loadConfig())
  }
  apiUrl ??= selected?.profile.api_url
  token ??= selected?.profile.token
  if (!apiUrl) {
    throw new UsageError('no API URL: pass --api-url (or set CORRAL_API_URL), or save a profile with `corral login --api-url URL --token TOKEN`')
  }
  if (!token) {
    throw new UsageError('no token: pass --token (or set CORRAL_TOKEN), or save a profile with `corral login --api-url URL --token TOKEN`')
  }
  return { apiUrl, token, ...(selected ? { profileName: selected.name, profile: selected.profile } : {}) }
}
