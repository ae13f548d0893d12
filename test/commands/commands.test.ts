import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import AuditQuery from '../../src/commands/audit/query.js'
import AuditStats from '../../src/commands/audit/stats.js'
import AuditTail from '../../src/commands/audit/tail.js'
import KeysCreate from '../../src/commands/keys/create.js'
import KeysList from '../../src/commands/keys/list.js'
import KeysRevoke from '../../src/commands/keys/revoke.js'
import Login from '../../src/commands/login.js'
import OrgMembersInvite from '../../src/commands/org/members/invite.js'
import OrgMembersList from '../../src/commands/org/members/list.js'
import ProfileList from '../../src/commands/profile/list.js'
import ProfileRemove from '../../src/commands/profile/remove.js'
import ProfileUse from '../../src/commands/profile/use.js'
import { envelope, json, type LoopbackApi, startLoopbackApi } from '../client/loopback-api.js'
import { runCommand } from './run-command.js'

let api: LoopbackApi
let configHome: string
let env: Record<string, string | undefined>

beforeEach(async () => {
  api = await startLoopbackApi()
  configHome = mkdtempSync(join(tmpdir(), 'corral-cli-'))
  // Isolate from the developer's own config and environment.
  env = { XDG_CONFIG_HOME: configHome, CORRAL_API_URL: undefined, CORRAL_TOKEN: undefined, CORRAL_PROFILE: undefined, CORRAL_ORG: undefined, NO_COLOR: '1' }
})
afterEach(async () => {
  await api.close()
  rmSync(configHome, { recursive: true, force: true })
})

const conn = () => ['--api-url', api.url, '--token', 'crl_tok']
const key = { id: 'key_1', label: 'ci', prefix: 'crl_ab12…', permission_set: 'read_only', created_at: '2026-01-01T00:00:00Z' }

describe('keys', () => {
  it('create prints the secret alone on stdout and warns on stderr', async () => {
    api.route('POST /v1/api-keys', (_req, res) => json(res, 201, { ...key, value: 'crl_the_secret' }))
    const r = await runCommand(KeysCreate, [...conn(), '--label', 'ci', '--permission-set', 'read_only'], env)
    expect(r.exitCode).toBe(0)
    expect(r.stdout).toBe('crl_the_secret\n')
    expect(r.stderr).toMatch(/will not be shown again/)
    expect(api.requests[0].body).toEqual({ label: 'ci', permission_set: 'read_only' })
  })

  it('create --json prints only the key object on stdout', async () => {
    api.route('POST /v1/api-keys', (_req, res) => json(res, 201, { ...key, value: 'crl_the_secret' }))
    const r = await runCommand(KeysCreate, [...conn(), '--label', 'ci', '--permission-set', 'read_only', '--json'], env)
    expect(JSON.parse(r.stdout)).toMatchObject({ id: 'key_1', value: 'crl_the_secret' })
  })

  it('rejects a permission set outside the enum as a usage error, without a request', async () => {
    const r = await runCommand(KeysCreate, [...conn(), '--label', 'ci', '--permission-set', 'root'], env)
    expect(r.exitCode).toBe(2)
    expect(r.stderr).toMatch(/permission-set/)
    expect(api.requests).toHaveLength(0)
  })

  it('list draws a table for people; --json gives the array', async () => {
    api.route('GET /v1/api-keys', (_req, res) => json(res, 200, { api_keys: [key] }))
    const people = await runCommand(KeysList, conn(), env)
    expect(people.stdout.split('\n')[0]).toMatch(/^ID\s+LABEL\s+PREFIX\s+PERMISSION_SET/)
    expect(people.stdout).toContain('never')
    const machine = await runCommand(KeysList, [...conn(), '--json'], env)
    expect(JSON.parse(machine.stdout)).toEqual([key])
  })

  it('renders an API error as one line with code and request id, exit 1', async () => {
    api.route('DELETE /v1/api-keys/key_9', (_req, res) => envelope(res, 404, 'not_found', 'no such API key'))
    const r = await runCommand(KeysRevoke, [...conn(), 'key_9'], env)
    expect(r.exitCode).toBe(1)
    expect(r.stdout).toBe('')
    expect(r.stderr.trim()).toBe('Error: no such API key [not_found] (request req_404)')
  })

  it('under --json an API error is the envelope plus exit_code on stdout', async () => {
    api.route('DELETE /v1/api-keys/key_9', (_req, res) => envelope(res, 403, 'permission_denied', 'lacks apikeys:write'))
    const r = await runCommand(KeysRevoke, [...conn(), 'key_9', '--json'], env)
    expect(r.exitCode).toBe(1)
    expect(JSON.parse(r.stdout)).toEqual({ error: { code: 'permission_denied', message: 'lacks apikeys:write', request_id: 'req_403' }, exit_code: 1 })
  })
})

describe('connection resolution', () => {
  it('names the flag to pass when nothing is configured (exit 2)', async () => {
    const r = await runCommand(KeysList, [], env)
    expect(r.exitCode).toBe(2)
    expect(r.stderr).toMatch(/no API URL: pass --api-url/)
  })

  it('reads CORRAL_API_URL and CORRAL_TOKEN', async () => {
    api.route('GET /v1/api-keys', (_req, res) => json(res, 200, { api_keys: [] }))
    const r = await runCommand(KeysList, ['--json'], { ...env, CORRAL_API_URL: api.url, CORRAL_TOKEN: 'crl_env' })
    expect(r.exitCode).toBe(0)
    expect(api.requests[0].headers.authorization).toBe('Bearer crl_env')
  })

  const me = (orgId = 'org_1') => ({ org: { id: orgId, name: 'default', posture: 'active' }, kind: 'api_key', user_id: 'system', permissions: ['audit:read'] })

  it('login asks /v1/me, saves a 0600 profile with the org, and later commands use it', async () => {
    api.route('GET /v1/me', (_req, res) => json(res, 200, me('org_1')))
    api.route('GET /v1/api-keys', (_req, res) => json(res, 200, { api_keys: [] }))
    api.route('GET /v1/orgs/org_1/memberships', (_req, res) => json(res, 200, { memberships: [] }))
    const login = await runCommand(Login, conn(), env)
    expect(login.exitCode).toBe(0)
    expect(login.stdout).not.toContain('crl_tok')
    expect(login.stdout).toMatch(/org default, an API key/)
    const path = join(configHome, 'corral', 'config.json')
    expect(statSync(path).mode & 0o777).toBe(0o600)
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual({ current: 'default', profiles: { default: { api_url: api.url, token: 'crl_tok', org_id: 'org_1' } } })

    const r = await runCommand(KeysList, ['--json'], env)
    expect(r.exitCode).toBe(0)
    expect(api.requests.at(-1)?.headers.authorization).toBe('Bearer crl_tok')
    // The saved org serves `org members` without another /v1/me round trip.
    const members = await runCommand(OrgMembersList, ['--json'], env)
    expect(members.exitCode).toBe(0)
    expect(api.requests.filter((q) => q.path === '/v1/me')).toHaveLength(1)
    // A flag still beats the profile, value by value.
    await runCommand(KeysList, ['--token', 'crl_other'], env)
    expect(api.requests.at(-1)?.headers.authorization).toBe('Bearer crl_other')
  })

  it('login --profile saves under that name even when it does not exist yet', async () => {
    api.route('GET /v1/me', (_req, res) => json(res, 200, me()))
    const r = await runCommand(Login, [...conn(), '--profile', 'bot', '--org', 'org_override', '--json'], env)
    expect(r.exitCode).toBe(0)
    expect(JSON.parse(r.stdout)).toMatchObject({ profile: 'bot', org_id: 'org_override', kind: 'api_key' })
  })

  it('login refuses a token the server rejects and saves nothing', async () => {
    api.route('GET /v1/me', (_req, res) => envelope(res, 401, 'unauthenticated', 'invalid credential'))
    const r = await runCommand(Login, conn(), env)
    expect(r.exitCode).toBe(1)
    expect(r.stderr).toMatch(/invalid credential \[unauthenticated\]/)
    expect(() => statSync(join(configHome, 'corral', 'config.json'))).toThrow()
  })

  it('profile list / use / remove manage saved profiles without showing tokens', async () => {
    api.route('GET /v1/me', (_req, res) => json(res, 200, me()))
    await runCommand(Login, [...conn(), '--profile', 'a'], env)
    await runCommand(Login, [...conn(), '--profile', 'b'], env)
    let list = await runCommand(ProfileList, ['--json'], env)
    expect(JSON.parse(list.stdout)).toEqual([
      { name: 'a', current: false, api_url: api.url, org_id: 'org_1' },
      { name: 'b', current: true, api_url: api.url, org_id: 'org_1' },
    ])
    expect(list.stdout).not.toContain('crl_tok')
    await runCommand(ProfileUse, ['a'], env)
    await runCommand(ProfileRemove, ['b'], env)
    list = await runCommand(ProfileList, ['--json'], env)
    expect(JSON.parse(list.stdout)).toEqual([{ name: 'a', current: true, api_url: api.url, org_id: 'org_1' }])
    const missing = await runCommand(ProfileUse, ['zzz'], env)
    expect(missing.exitCode).toBe(1)
    expect(missing.stderr).toMatch(/profile "zzz" not found \(known: a\)/)
    const viaFlag = await runCommand(KeysList, ['--profile', 'zzz'], env)
    expect(viaFlag.stderr).toMatch(/profile "zzz" not found/)
  })
})

describe('audit', () => {
  const ev = (id: string, extra: Record<string, unknown> = {}) => ({
    id, org_id: 'org_1', user_id: 'system', timestamp: `2026-01-01T00:00:0${id.slice(-1)}Z`, event_type: 'policy_decision', category: 'audit', actor: 'policy-engine', ...extra,
  })

  it('query passes every query flag through and prints the cursor hint on stderr', async () => {
    api.route('GET /v1/audit', (_req, res) => json(res, 200, { events: [ev('e1', { decision: 'deny', reason: 'no_match', destination: 'api.x.com', method: 'POST', path: '/v1' })], cursor: 'cur_next' }))
    const r = await runCommand(AuditQuery, [...conn(), '--filter', 'decision=deny', '-f', 'destination!=', '--from', '2026-01-01T00:00:00Z', '--to', '2026-01-02T00:00:00+01:00', '--order', 'asc', '--limit', '1', '--cursor', 'cur_prev'], env)
    expect(r.exitCode).toBe(0)
    const q = api.requests[0].query
    expect(q.getAll('filter')).toEqual(['decision=deny', 'destination!='])
    expect(q.get('from')).toBe('2026-01-01T00:00:00.000Z')
    expect(q.get('to')).toBe('2026-01-01T23:00:00.000Z')
    expect([q.get('order'), q.get('limit'), q.get('cursor')]).toEqual(['asc', '1', 'cur_prev'])
    expect(r.stdout).toMatch(/deny\/no_match\s+POST api\.x\.com\/v1/)
    expect(r.stderr).toContain('--cursor cur_next')
  })

  it('query --all --json streams NDJSON across pages', async () => {
    api.route('GET /v1/audit', (req, res) =>
      req.query.get('cursor') ? json(res, 200, { events: [ev('e3')] }) : json(res, 200, { events: [ev('e1'), ev('e2')], cursor: 'c' }),
    )
    const r = await runCommand(AuditQuery, [...conn(), '--all', '--json', '--limit', '2'], env)
    expect(r.stdout.trim().split('\n').map((l) => JSON.parse(l).id)).toEqual(['e1', 'e2', 'e3'])
    expect(r.stderr).toMatch(/3 events/)
  })

  it('query rejects a bad filter or time before any request (exit 2)', async () => {
    for (const [args, reason] of [[['--filter', 'user_id=x'], /--filter: unknown filter column "user_id"/], [['--from', 'yesterday'], /--from: invalid time "yesterday"/], [['--limit', '10001'], /10001/]] as const) {
      const r = await runCommand(AuditQuery, [...conn(), ...args], env)
      expect(r.exitCode, args.join(' ')).toBe(2)
      expect(r.stderr).toMatch(reason)
    }
    expect(api.requests).toHaveLength(0)
  })

  it('query surfaces invalid_cursor from the server', async () => {
    api.route('GET /v1/audit', (_req, res) => envelope(res, 400, 'invalid_cursor', 'cursor does not belong to this query'))
    const r = await runCommand(AuditQuery, [...conn(), '--cursor', 'forged'], env)
    expect(r.exitCode).toBe(1)
    expect(r.stderr).toMatch(/\[invalid_cursor\] \(request req_400\)/)
  })

  it('stats sends the stats parameters and draws group, bucket and value columns', async () => {
    api.route('GET /v1/workspaces/ws_1/audit/stats', (_req, res) =>
      json(res, 200, { buckets: [{ group: { decision: 'allow' }, bucket: '2026-01-01T00:00:00Z', value: 4 }, { group: { decision: 'deny' }, bucket: '2026-01-01T00:00:00Z', value: 1 }] }),
    )
    const r = await runCommand(AuditStats, [...conn(), '-w', 'ws_1', '--group-by', 'decision', '--time-bucket', '1h', '--metric', 'sum:debits.tokens', '--top', '3:decision', '--bucket-by', 'latency_ms:10,100'], env)
    const q = api.requests[0].query
    expect(Object.fromEntries(q)).toMatchObject({ group_by: 'decision', time_bucket: '1h', metric: 'sum:debits.tokens', top: '3:decision', bucket_by: 'latency_ms:10,100' })
    expect(r.stdout.split('\n')[0]).toMatch(/^DECISION\s+BUCKET\s+VALUE$/)
    expect(r.stdout).toMatch(/deny\s+2026-01-01T00:00:00Z\s+1/)
  })

  it('tail sends filters to the server, re-checks them on each event, and stops after --count', async () => {
    api.route('GET /v1/activity/stream', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      for (const e of [ev('e1', { decision: 'allow' }), ev('e2', { decision: 'deny', reason: 'no_token' }), ev('e3', { decision: 'deny', reason: 'no_match' })]) {
        res.write(`event: activity\nid: ${e.id}\ndata: ${JSON.stringify(e)}\n\n`)
      }
    })
    api.route('GET /v1/audit', (_req, res) => json(res, 200, { events: [] }))
    const r = await runCommand(AuditTail, [...conn(), '--filter', 'decision=deny', '--count', '2', '--json'], env)
    expect(r.exitCode).toBe(0)
    expect(r.stdout.trim().split('\n').map((l) => JSON.parse(l).id)).toEqual(['e2', 'e3'])
    expect(api.requests.map((q) => q.path)).toEqual(['/v1/audit', '/v1/activity/stream'])
    expect(api.requests[1].query.getAll('filter')).toEqual(['decision=deny'])
  })

  it('tail stops with one error line when the stream is refused', async () => {
    api.route('GET /v1/activity/stream', (_req, res) => envelope(res, 401, 'unauthenticated', 'the API key was revoked'))
    const r = await runCommand(AuditTail, [...conn(), '--last-event-id', 'e0'], env)
    expect(r.exitCode).toBe(1)
    expect(r.stderr.trim().split('\n').at(-1)).toBe('Error: the API key was revoked [unauthenticated] (request req_401)')
  })
})

describe('org members', () => {
  it("defaults to the credential's own org (GET /v1/me)", async () => {
    api.route('GET /v1/me', (_req, res) => json(res, 200, { org: { id: 'org_me', name: 'x' }, kind: 'api_key', user_id: 'system', permissions: [] }))
    api.route('GET /v1/orgs/org_me/memberships', (_req, res) => json(res, 200, { memberships: [] }))
    const r = await runCommand(OrgMembersList, [...conn(), '--json'], env)
    expect(r.exitCode).toBe(0)
    expect(api.requests.map((q) => q.path)).toEqual(['/v1/me', '/v1/orgs/org_me/memberships'])
  })

  it('lists and invites in the given org', async () => {
    api.route('GET /v1/orgs/org_1/memberships', (_req, res) => json(res, 200, { memberships: [{ org_id: 'org_1', user_id: 'usr_1', email: 'a@x.io', role: 'owner', status: 'active', created_at: '2026-01-01T00:00:00Z' }] }))
    api.route('POST /v1/orgs/org_1/memberships', (req, res) => json(res, 201, { org_id: 'org_1', user_id: 'usr_2', status: 'pending', created_at: '2026-01-01T00:00:00Z', ...(req.body as object) }))
    const list = await runCommand(OrgMembersList, [...conn(), '--org', 'org_1'], env)
    expect(list.stdout).toMatch(/usr_1\s+a@x\.io\s+owner\s+active/)
    const invite = await runCommand(OrgMembersInvite, [...conn(), 'b@x.io'], { ...env, CORRAL_ORG: 'org_1' })
    expect(invite.stdout).toBe('Invited b@x.io as member (user usr_2, pending).\n')
    expect(api.requests[1].body).toEqual({ email: 'b@x.io', role: 'member' })
  })
})
