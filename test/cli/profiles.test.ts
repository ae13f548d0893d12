import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { configPath, readConfig, selectProfile, writeConfig } from '../../src/cli/profiles.js'

let dir: string
beforeEach(() => void (dir = mkdtempSync(join(tmpdir(), 'corral-profiles-'))))
afterEach(() => rmSync(dir, { recursive: true, force: true }))

describe('profiles', () => {
  it('lives under $XDG_CONFIG_HOME, else ~/.config (a relative XDG path is ignored, per the XDG spec)', () => {
    expect(configPath({ XDG_CONFIG_HOME: '/x/cfg' })).toBe('/x/cfg/corral/config.json')
    expect(configPath({})).toBe(join(homedir(), '.config', 'corral', 'config.json'))
    expect(configPath({ XDG_CONFIG_HOME: 'rel' })).toBe(join(homedir(), '.config', 'corral', 'config.json'))
  })

  it('writes 0600 in a 0700 directory and tightens an existing looser file', () => {
    const path = join(dir, 'corral', 'config.json')
    mkdirSync(join(dir, 'corral'), { mode: 0o700 })
    writeFileSync(path, '{"profiles":{}}', { mode: 0o644 })
    writeConfig({ current: 'p', profiles: { p: { api_url: 'http://h', token: 't' } } }, path)
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(statSync(join(dir, 'corral')).mode & 0o777).toBe(0o700)
    expect(readConfig(path)).toEqual({ current: 'p', profiles: { p: { api_url: 'http://h', token: 't' } } })
  })

  it('treats a missing file as no profiles and a corrupt one as a clear error', () => {
    expect(readConfig(join(dir, 'none.json'))).toEqual({ profiles: {} })
    const bad = join(dir, 'bad.json')
    writeFileSync(bad, '{not json')
    expect(() => readConfig(bad)).toThrow(/is not a valid corral config .*; fix or delete it/)
  })

  it('selects the named profile, else the current one, else "default"', () => {
    const p = { api_url: 'http://h', token: 't' }
    expect(selectProfile({ profiles: { a: p, b: p }, current: 'b' })?.name).toBe('b')
    expect(selectProfile({ profiles: { a: p, b: p }, current: 'b' }, 'a')?.name).toBe('a')
    expect(selectProfile({ profiles: { default: p } })?.name).toBe('default')
    expect(selectProfile({ profiles: { a: p } })).toBeUndefined()
    expect(() => selectProfile({ profiles: {} }, 'x')).toThrow(/none saved; run `corral login`/)
  })
})
