// The CLI's session and usage surface through the built binary against a real `corral serve`:
// login picking up <data-dir>/admin.key, login never switching the current profile silently,
// whoami, logout, usage errors that name the flag or argument, shell completion.

import { mkdirSync, readFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { LoginResult } from '../../src/commands/login.js'
import type { WhoamiResult } from '../../src/commands/whoami.js'
import { runCorral, startStack, type Stack } from '../helpers/serve.js'

let stack: Stack
beforeAll(async () => {
  stack = await startStack()
})
afterAll(() => stack?.close())

/** The CLI with only the suite's config home: no admin token in the environment. */
const corral = (...args: string[]) => runCorral(args, { env: { XDG_CONFIG_HOME: stack.dir } })
const config = () => JSON.parse(readFileSync(join(stack.dir, 'corral', 'config.json'), 'utf8')) as { current?: string; profiles: Record<string, { api_url: string; token: string }> }

describe('corral login, whoami, logout', () => {
  it('login without a token picks up <data-dir>/admin.key and says so; whoami names the profile and org', async () => {
    const r = await corral('login', '--api-url', stack.serve.url, '--data-dir', stack.serve.dataDir, '--json')
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr).toContain(`using the owner key serve wrote to ${join(stack.serve.dataDir, 'admin.key')}`)
    const login = JSON.parse(r.stdout) as LoginResult
    expect(login).toMatchObject({ profile: 'default', token_source: join(stack.serve.dataDir, 'admin.key'), kind: 'api_key' })
    expect(r.stdout).not.toContain(stack.serve.adminKey)
    expect(config().profiles.default.token).toBe(stack.serve.adminKey)

    const who = await corral('whoami', '--json')
    expect(who.code, who.stderr).toBe(0)
    const me = JSON.parse(who.stdout) as WhoamiResult
    expect(me).toMatchObject({ api_url: stack.serve.url, profile: 'default', kind: 'api_key', user_id: 'system', org: { id: login.org_id } })
    expect(who.stdout).not.toContain(stack.serve.adminKey)
    const people = await corral('whoami')
    expect(people.stdout).toMatch(/^api_url\s+http:\/\/127\.0\.0\.1:\d+$/m)
    expect(people.stdout).toMatch(/^profile\s+default$/m)
  })

  it('login with no token and no admin.key in the data dir is one usage line naming --token', async () => {
    const r = await corral('login', '--api-url', stack.serve.url, '--data-dir', join(stack.dir, 'nowhere'))
    expect(r.code).toBe(2)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    expect(r.stderr).toMatch(/^Error: login needs --token TOKEN .*admin\.key/)
  })

  it('login --profile switching the current profile says so and how to switch back', async () => {
    const r = await corral('login', '--profile', 'second', '--api-url', stack.serve.url, '--token', stack.serve.adminKey, '--json')
    expect(r.code, r.stderr).toBe(0)
    expect(JSON.parse(r.stdout)).toMatchObject({ profile: 'second', previous_current: 'default' })
    expect(r.stderr).toContain('Profile "second" is now the current profile (was "default"; switch back with `corral profile use default`)')
    expect(config().current).toBe('second')
    // Any other command's --profile picks the profile for that command only.
    const who = await corral('whoami', '--profile', 'default', '--json')
    expect(JSON.parse(who.stdout)).toMatchObject({ profile: 'default' })
    expect(config().current).toBe('second')
  })

  it('logout forgets the current profile; whoami then names what to pass', async () => {
    const r = await corral('logout')
    expect(r.code, r.stderr).toBe(0)
    expect(r.stdout).toMatch(/^Logged out: removed profile "second"/)
    expect(Object.keys(config().profiles)).toEqual(['default'])
    expect(config().current).toBeUndefined()
    // With no current profile, the one named "default" is used (profiles.ts); forget it too.
    expect((await corral('logout', '--json')).stdout).toContain('"removed": "default"')
    const who = await corral('whoami')
    expect(who.code).toBe(2)
    expect(who.stderr).toMatch(/^Error: no API URL: pass --api-url/)
    const again = await corral('logout')
    expect(again.code).toBe(1)
    expect(again.stderr.trim()).toBe('Error: not logged in: no current profile to forget (see `corral profile list`)')
  })
})

describe('usage errors and completion', () => {
  it('a missing flag or argument is named in one line, exit 2, no request sent', async () => {
    const flag = await corral('keys', 'create', '--api-url', stack.serve.url, '--token', 't', '--permission-set', 'read_only')
    expect(flag.code).toBe(2)
    expect(flag.stderr.trim()).toBe('Error: Missing required flag --label (see --help)')
    const arg = await corral('task', 'show', '--api-url', stack.serve.url, '--token', 't')
    expect(arg.code).toBe(2)
    expect(arg.stderr.trim()).toBe('Error: Missing required argument ID (see --help)')
    const bad = await corral('audit', 'query', '--api-url', stack.serve.url, '--token', 't', '--limit', 'x')
    expect(bad.code).toBe(2)
    expect(bad.stderr.trim()).toMatch(/^Error: Parsing --limit: Expected an integer but received: x \(see --help\)$/)
  })

  it('an unknown command is a usage error: exit 2, one line suggesting the closest command and pointing at help', async () => {
    const r = await corral('wrokspace', 'list')
    expect(r.code).toBe(2)
    expect(r.stderr.trim()).toBe('Error: "wrokspace list" is not a corral command. Did you mean "workspace list"? Run `corral help` for a list of commands.')
  })

  it('shell completion: autocomplete prints setup instructions and a completion script naming the commands', async () => {
    const setup = await runCorral(['autocomplete', 'bash'], { env: { XDG_CONFIG_HOME: stack.dir, XDG_CACHE_HOME: join(stack.dir, 'cache') } })
    expect(setup.code, setup.stderr).toBe(0)
    expect(setup.stdout).toMatch(/corral autocomplete/)
    const script = await runCorral(['autocomplete', 'script', 'bash'], { env: { XDG_CONFIG_HOME: stack.dir, XDG_CACHE_HOME: join(stack.dir, 'cache') } })
    expect(script.code, script.stderr).toBe(0)
    const setupFile = /CORRAL_AC_BASH_SETUP_PATH=(\S+)/.exec(script.stdout)?.[1]
    expect(setupFile?.startsWith(join(stack.dir, 'cache'))).toBe(true)
    // The setup file sources the completion function, which knows every command.
    expect(readFileSync(setupFile!, 'utf8')).toContain('functions/bash/corral.bash')
    const body = readFileSync(join(stack.dir, 'cache', 'corral', 'autocomplete', 'functions', 'bash', 'corral.bash'), 'utf8')
    expect(body).toMatch(/_corral/)
    expect(body).toContain('workspace:list')
  })
})

describe('ca export and admin proxy-token outside the data dir', () => {
  it('never create a CA or a store silently: one line naming the data dir, nothing written', async () => {
    const empty = join(stack.dir, 'not-a-data-dir')
    mkdirSync(empty)
    const ca = await runCorral(['ca', 'export', '--data-dir', empty])
    expect(ca.code).toBe(1)
    expect(ca.stderr.trim()).toBe(`Error: no corral CA in ${empty}: run this where serve runs or pass its --data-dir (or --create to make a new CA there)`)
    const token = await runCorral(['admin', 'proxy-token', '--workspace', 'ws_x', '--data-dir', empty])
    expect(token.code).toBe(1)
    expect(token.stderr.trim()).toBe(`Error: no corral store at ${join(empty, 'corral.db')}: run this where serve runs, or pass its --data-dir or --db`)
    expect(readdirSync(empty)).toEqual([])
    // Serve's own data dir works as before.
    const real = await runCorral(['ca', 'export', '--data-dir', stack.serve.dataDir])
    expect(real.code, real.stderr).toBe(0)
    expect(real.stdout).toMatch(/^-----BEGIN CERTIFICATE-----/)
  })
})

describe('corral doctor', () => {
  it('reports each check, names the fix of each one that is not ok, exit 1 on a failure', async () => {
    const port = Number(new URL(stack.serve.url).port)
    const r = await runCorral(['doctor', '--data-dir', stack.serve.dataDir, '--port', String(port), '--proxy-port', '1', '--json'], {
      env: { XDG_CONFIG_HOME: stack.dir, CORRAL_PACK_REGISTRY: '127.0.0.1:9' },
    })
    expect(r.code).toBe(1)
    const checks = JSON.parse(r.stdout) as Array<{ check: string; status: string; detail: string; fix?: string }>
    const by = Object.fromEntries(checks.map((c) => [c.check, c]))
    expect(Object.keys(by)).toEqual(['node', 'bubblewrap', 'api port', 'proxy port', 'database', 'ca', 'registry'])
    expect(by.node.status).toBe('ok')
    expect(by['api port']).toMatchObject({ status: 'fail', fix: expect.stringContaining('--port') })
    expect(by.database).toMatchObject({ status: 'ok', detail: expect.stringContaining('corral.db opens') })
    expect(by.ca.status).toBe('ok')
    expect(by.registry).toMatchObject({ status: 'fail', fix: expect.stringContaining('CORRAL_PACK_REGISTRY') })
    for (const c of checks) if (c.status !== 'ok') expect(c.fix, c.check).toMatch(/\S/)

    // A data dir with nothing in it: warnings with their fixes, and nothing is created there.
    const empty = join(stack.dir, 'doctor-empty')
    mkdirSync(empty)
    const fresh = await runCorral(['doctor', '--data-dir', empty, '--port', '1', '--proxy-port', '1'], { env: { XDG_CONFIG_HOME: stack.dir } })
    expect(fresh.stdout).toMatch(/^database\s+warn\s+no store yet/m)
    expect(fresh.stdout).toMatch(/^ca: serve creates it on first start/m)
    expect(readdirSync(empty)).toEqual([])
  })
})
