// The CLI binary against a real `corral serve`: every command of the foundation, run as a user
// would (node bin/run.js …), asserting exit codes and parsing --json. No HTTP mocks.

import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import type { ApiKey, CreatedApiKey, Membership, StatsResult } from '../../src/client/types.js'
import type { LoginResult } from '../../src/commands/login.js'
import { CORRAL_BIN, runCorral, startServe, startStack, type RunningServe, type Stack } from '../helpers/serve.js'

let stack: Stack
let serve: RunningServe
let configHome: string
/** Tails still running when a test fails are killed at the end, never left behind. */
const tails = new Set<import('node:child_process').ChildProcess>()

beforeAll(async () => {
  // The CLI's own login is under test: `corral()` runs with the config home only, no admin token.
  stack = await startStack()
  ;({ serve, dir: configHome } = stack)
})
afterAll(async () => {
  for (const child of tails) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  await stack?.close()
})

const env = () => ({ XDG_CONFIG_HOME: configHome })
const corral = (...args: string[]) => runCorral(args, { env: env() })

async function json<T>(...args: string[]): Promise<T> {
  const r = await corral(...args, '--json')
  expect(r.code, `${args.join(' ')}\n${r.stderr}\n${r.stdout}`).toBe(0)
  return JSON.parse(r.stdout) as T
}

/** Starts `audit tail --json` and resolves once it is connected; events arrive as parsed lines. */
function tail(args: string[], extraEnv: Record<string, string> = {}) {
  const child = spawn(process.execPath, [CORRAL_BIN, 'audit', 'tail', '--json', ...args], {
    env: { ...process.env, ...env(), NO_COLOR: '1', ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (c) => (stdout += String(c)))
  child.stderr.on('data', (c) => (stderr += String(c)))
  tails.add(child)
  const exited = new Promise<number | null>((r) => child.once('close', (code) => r(code)))
  const connected = new Promise<void>((resolve, reject) => {
    const check = () => /Following/.test(stderr) && resolve()
    child.stderr.on('data', check)
    void exited.then(() => reject(new Error(`tail exited before connecting: ${stderr}`)))
  })
  connected.catch(() => {}) // a refused tail never connects; tests that expect that await `exited`
  return {
    child,
    connected,
    exited,
    events: () => stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as AuditEvent),
    stdout: () => stdout,
    stderr: () => stderr,
  }
}

// Every test spawns several processes; a loaded 2-core CI machine needs more than the 30 s default.
describe('corral CLI against a real serve', { timeout: 90_000 }, () => {
  let login: LoginResult

  it('login verifies the admin key and saves a 0600 profile', async () => {
    login = await json<LoginResult>('login', '--api-url', serve.url, '--token', serve.adminKey)
    expect(login).toMatchObject({ profile: 'default', api_url: serve.url, kind: 'api_key', user_id: 'system' })
    expect(login.org_id).toMatch(/\S/)
    expect(statSync(join(configHome, 'corral', 'config.json')).mode & 0o777).toBe(0o600)
    const profiles = await json<{ name: string; current: boolean }[]>('profile', 'list')
    expect(profiles).toEqual([{ name: 'default', current: true, api_url: serve.url, org_id: login.org_id }])
  })

  it('login with a forged token fails with the 401 line and saves nothing new', async () => {
    const r = await corral('login', '--profile', 'bad', '--api-url', serve.url, '--token', 'crl_forged')
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/^Error: .+ \[unauthenticated\] \(request req_[0-9a-f]+\)$/m)
    expect((await json<{ name: string }[]>('profile', 'list')).map((p) => p.name)).toEqual(['default'])
  })

  it('keys: create prints the secret once, list never shows it, revoke gives 401 at once', async () => {
    const people = await corral('keys', 'create', '--label', 'e2e-plain', '--permission-set', 'read_only')
    expect(people.code).toBe(0)
    expect(people.stdout).toMatch(/^crl_\S+\n$/)
    expect(people.stderr).toMatch(/will not be shown again/)

    const key = await json<CreatedApiKey>('keys', 'create', '--label', 'e2e', '--permission-set', 'read_only')
    expect(key).toMatchObject({ label: 'e2e', permission_set: 'read_only' })
    const listed = await json<ApiKey[]>('keys', 'list')
    expect(listed.find((k) => k.id === key.id)).toMatchObject({ label: 'e2e', prefix: key.prefix })
    expect(JSON.stringify(listed)).not.toContain(key.value)

    // The new read-only key is valid but may not manage keys: 403 with the envelope, exit 1.
    const denied = await corral('keys', 'list', '--token', key.value)
    expect(denied.code).toBe(1)
    expect(denied.stderr).toMatch(/\[permission_denied\] \(request req_/)
    const deniedJson = await corral('keys', 'list', '--token', key.value, '--json')
    expect(JSON.parse(deniedJson.stdout)).toMatchObject({ error: { code: 'permission_denied' }, exit_code: 1 })

    expect(await json('keys', 'revoke', key.id)).toEqual({ id: key.id, status: 'revoked' })
    const after = await corral('audit', 'query', '--limit', '1', '--token', key.value)
    expect(after.code).toBe(1)
    expect(after.stderr).toMatch(/\[unauthenticated\]/)
    const again = await corral('keys', 'revoke', key.id)
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/\[not_found\]/)
  })

  it('keys create with an over-long label is the server validation error; a bad set is a usage error', async () => {
    const long = await corral('keys', 'create', '--label', 'x'.repeat(101), '--permission-set', 'read_only')
    expect(long.code).toBe(1)
    expect(long.stderr).toMatch(/\[validation_error\]/)
    const usage = await corral('keys', 'create', '--label', 'x', '--permission-set', 'root')
    expect(usage.code).toBe(2)
  })

  it('audit query: filters, pages, --all NDJSON equals one big page', async () => {
    const page = await json<{ events: AuditEvent[]; cursor?: string }>('audit', 'query', '--filter', 'event_type=api_key_created,api_key_revoked', '--order', 'asc')
    const types = page.events.map((e) => e.event_type)
    expect(types.filter((t) => t === 'api_key_created').length).toBeGreaterThanOrEqual(2)
    expect(types).toContain('api_key_revoked')
    expect(page.events.every((e) => e.user_id === 'system')).toBe(true)
    expect(JSON.stringify(page.events)).not.toMatch(/crl_[A-Za-z0-9_-]{20,}/) // no secret in audit detail

    const one = await json<{ events: AuditEvent[]; cursor?: string }>('audit', 'query', '--limit', '1')
    expect(one.events).toHaveLength(1)
    expect(one.cursor).toBeTruthy()

    const all = await corral('audit', 'query', '--limit', '2', '--all', '--json', '--order', 'asc')
    expect(all.code).toBe(0)
    const streamed = all.stdout.trim().split('\n').map((l) => (JSON.parse(l) as AuditEvent).id)
    const big = await json<{ events: AuditEvent[] }>('audit', 'query', '--limit', '10000', '--order', 'asc')
    expect(streamed).toEqual(big.events.map((e) => e.id))

    const table = await corral('audit', 'query', '--limit', '1')
    expect(table.stdout.split('\n')[0]).toMatch(/^TIME\s+EVENT_TYPE\s+ACTOR\s+USER/)
    expect(table.stderr).toMatch(/More events: --cursor \S+/)
  })

  it('audit query: a tampered cursor is invalid_cursor; a bad filter never leaves the CLI', async () => {
    const bad = await corral('audit', 'query', '--cursor', 'not-a-real-cursor')
    expect(bad.code).toBe(1)
    expect(bad.stderr).toMatch(/\[invalid_cursor\]/)
    const filter = await corral('audit', 'query', '--filter', 'secret=1')
    expect(filter.code).toBe(2)
    expect(filter.stderr).toMatch(/unknown filter column "secret"/)
  })

  it('audit stats groups events by type', async () => {
    const stats = await json<StatsResult>('audit', 'stats', '--group-by', 'event_type', '--filter', 'category=audit')
    const created = stats.buckets.find((b) => b.group.event_type === 'api_key_created')
    expect(created?.value).toBeGreaterThanOrEqual(2)
    const people = await corral('audit', 'stats', '--group-by', 'event_type', '--time-bucket', '1h')
    expect(people.code).toBe(0)
    expect(people.stdout.split('\n')[0]).toMatch(/^EVENT_TYPE\s+BUCKET\s+VALUE$/)
  })

  it('audit tail follows new events with server-side filters, and resumes after a given id', async () => {
    const t = tail(['--filter', 'event_type=api_key_created', '--count', '1'])
    await t.connected
    const key = await json<CreatedApiKey>('keys', 'create', '--label', 'tail-me', '--permission-set', 'read_only')
    expect(await t.exited).toBe(0)
    const [seen] = t.events()
    expect(seen).toMatchObject({ event_type: 'api_key_created', detail: { resource_id: key.id, label: 'tail-me' } })

    // Resume after that event: the next matching one is the revoke of the same key, replayed or live.
    await json('keys', 'revoke', key.id)
    const resumed = tail(['--last-event-id', seen.id, '--filter', 'event_type=api_key_revoked', '--count', '1'])
    expect(await resumed.exited).toBe(0)
    expect(resumed.events()[0]).toMatchObject({ event_type: 'api_key_revoked', detail: { resource_id: key.id } })
  })

  it('audit tail survives the server ending the stream: it reconnects with Last-Event-ID, no gap, no duplicate', async () => {
    // A second serve whose streams last under a second, so every tail reconnects several times.
    const short = await startServe({ env: { CORRAL_STREAM_MAX_DURATION_MS: '800', CORRAL_STREAM_HEARTBEAT_MS: '200' } })
    try {
      const conn = { CORRAL_API_URL: short.url, CORRAL_TOKEN: short.adminKey }
      const create = async (label: string) => {
        const r = await runCorral(['keys', 'create', '--label', label, '--permission-set', 'read_only', '--json'], { env: { ...env(), ...conn } })
        expect(r.code, r.stderr).toBe(0)
        return (JSON.parse(r.stdout) as CreatedApiKey).id
      }
      const t = tail(['--filter', 'event_type=api_key_created', '--count', '3'], conn)
      await t.connected
      const reconnects = () => (t.stderr().match(/reconnecting/g) ?? []).length
      const waitFor = async (cond: () => boolean) => {
        while (!cond()) await new Promise((r) => setTimeout(r, 50))
      }
      const ids = [await create('r1')]
      await waitFor(() => t.events().length === 1)
      // Each next key is created only after the stream has been cut at least once more.
      for (const label of ['r2', 'r3']) {
        const before = reconnects()
        await waitFor(() => reconnects() > before)
        ids.push(await create(label))
      }
      expect(await t.exited).toBe(0)
      expect(t.events().map((e) => e.detail?.resource_id)).toEqual(ids)
    } finally {
      await short.stop()
    }
  }, 120_000) // several process spawns and reconnect delays; generous for a loaded CI machine

  it('audit tail exits 0 on SIGINT and 1 with one line when its key is revoked', async () => {
    const t = tail([])
    await t.connected
    t.child.kill('SIGINT')
    expect(await t.exited).toBe(0)

    const key = await json<CreatedApiKey>('keys', 'create', '--label', 'tail-revoked', '--permission-set', 'read_only')
    await json('keys', 'revoke', key.id)
    // Under --json the failure is the envelope on stdout; without it, one line on stderr.
    const refused = tail([], { CORRAL_TOKEN: key.value })
    expect(await refused.exited).toBe(1)
    expect(JSON.parse(refused.stdout())).toMatchObject({ error: { code: 'unauthenticated' }, exit_code: 1 })
    const plain = await runCorral(['audit', 'tail'], { env: { ...env(), CORRAL_TOKEN: key.value } })
    expect(plain.code).toBe(1)
    expect(plain.stderr).toMatch(/^Error: .+ \[unauthenticated\] \(request req_[0-9a-f]+\)$/m)
  })

  it('org members: invite, list, update, remove, with last-owner protection', async () => {
    const invited = await json<Membership>('org', 'members', 'invite', 'ada@example.com', '--role', 'admin')
    expect(invited).toMatchObject({ email: 'ada@example.com', role: 'admin', status: 'pending', org_id: login.org_id })
    const members = await json<Membership[]>('org', 'members', 'list')
    expect(members.map((m) => m.email)).toContain('ada@example.com')
    const owner = members.find((m) => m.role === 'owner')!
    expect(await json<Membership>('org', 'members', 'update', invited.user_id, '--role', 'member')).toMatchObject({ role: 'member' })
    expect(await json('org', 'members', 'remove', invited.user_id)).toEqual({ org_id: login.org_id, user_id: invited.user_id, status: 'removed' })

    const lastOwner = await corral('org', 'members', 'remove', owner.user_id)
    expect(lastOwner.code).toBe(1)
    expect(lastOwner.stderr).toMatch(/\[last_owner\]/)
    const other = await corral('org', 'members', 'list', '--org', 'org_someone_else')
    expect(other.code).toBe(1)
    expect(other.stderr).toMatch(/\[not_found\]/)

    const events = await json<{ events: AuditEvent[] }>('audit', 'query', '--filter', 'event_type=membership_invited,membership_updated,membership_removed', '--order', 'asc')
    expect(events.events.map((e) => e.event_type)).toEqual(['membership_invited', 'membership_updated', 'membership_removed'])
  })

  it('without any connection the CLI names the flag to pass (exit 2); --version and --help work', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'corral-cli-empty-'))
    try {
      const r = await runCorral(['keys', 'list'], { env: { XDG_CONFIG_HOME: empty } })
      expect(r.code).toBe(2)
      expect(r.stderr).toMatch(/no API URL: pass --api-url/)
    } finally {
      rmSync(empty, { recursive: true, force: true })
    }
    const version = await corral('--version')
    expect(version.stdout).toMatch(/^corral\/\d+\.\d+\.\d+ \S+ node-v\d+/)
    const help = await corral('--help')
    expect(help.stdout).toMatch(/TOPICS[\s\S]*audit[\s\S]*keys/)
  })
})
