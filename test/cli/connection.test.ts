import { describe, expect, it } from 'vitest'
import { resolveConnection } from '../../src/cli/connection.js'
import { UsageError } from '../../src/cli/errors.js'
import type { ProfileConfig } from '../../src/cli/profiles.js'

const config: ProfileConfig = {
  current: 'dev',
  profiles: {
    dev: { api_url: 'http://dev:7070', token: 'crl_dev', org_id: 'org_dev' },
    prod: { api_url: 'https://prod', token: 'crl_prod' },
  },
}
const load = () => config

describe(resolveConnection.name, () => {
  it('takes explicit flags over everything', () => {
    const c = resolveConnection({ apiUrl: 'http://flag', token: 'crl_flag', profile: 'prod' }, { CORRAL_API_URL: 'http://env', CORRAL_TOKEN: 'crl_env' }, load)
    expect(c).toMatchObject({ apiUrl: 'http://flag', token: 'crl_flag' })
  })

  it('lets a chosen profile outrank the environment, so an exported dev token never reaches prod', () => {
    const env = { CORRAL_API_URL: 'http://env', CORRAL_TOKEN: 'crl_env' }
    expect(resolveConnection({ profile: 'prod' }, env, load)).toEqual({ apiUrl: 'https://prod', token: 'crl_prod', profileName: 'prod', profile: config.profiles.prod })
    expect(resolveConnection({}, { ...env, CORRAL_PROFILE: 'prod' }, load)).toMatchObject({ apiUrl: 'https://prod', token: 'crl_prod' })
  })

  it('uses the environment over the current profile, value by value', () => {
    expect(resolveConnection({}, { CORRAL_API_URL: 'http://env', CORRAL_TOKEN: 'crl_env' }, () => { throw new Error('config must not be read') })).toEqual({ apiUrl: 'http://env', token: 'crl_env' })
    expect(resolveConnection({}, { CORRAL_TOKEN: 'crl_env' }, load)).toMatchObject({ apiUrl: 'http://dev:7070', token: 'crl_env', profileName: 'dev' })
    expect(resolveConnection({ token: 'crl_flag' }, {}, load)).toMatchObject({ apiUrl: 'http://dev:7070', token: 'crl_flag' })
  })

  it('falls back to the current profile, and treats empty variables as unset', () => {
    expect(resolveConnection({}, { CORRAL_API_URL: '', CORRAL_PROFILE: '' }, load)).toMatchObject({ apiUrl: 'http://dev:7070', token: 'crl_dev', profile: { org_id: 'org_dev' } })
  })

  it('refuses an unknown chosen profile instead of falling back', () => {
    expect(() => resolveConnection({ profile: 'staging' }, { CORRAL_API_URL: 'http://env', CORRAL_TOKEN: 't' }, load)).toThrow(/profile "staging" not found \(known: dev, prod\)/)
  })

  it('names the flag to pass when nothing supplies a value (a usage error)', () => {
    const none = () => ({ profiles: {} })
    expect(() => resolveConnection({}, {}, none)).toThrow(UsageError)
    expect(() => resolveConnection({}, {}, none)).toThrow(/no API URL: pass --api-url/)
    expect(() => resolveConnection({ apiUrl: 'http://x' }, {}, none)).toThrow(/no token: pass --token/)
  })
})
