// `corral credential create/list/show`, the missing-material warnings of `corral role create/update`
// and `corral caps lint --api-url`, as a user runs them (node bin/run.js) against a real `corral
// serve`: an admin key and a member's session, personal and org credentials, one-line errors and
// exit codes, --json data. No HTTP mocks.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { runCorral, startStack, type Stack } from '../helpers/serve.js'

let stack: Stack
let member: { id: string; token: string }
const ORG_TOKEN = 'ghp_org_e2e_secret_9f8e7d'
const MY_TOKEN = 'ghp_member_e2e_secret_1a2b3c'

beforeAll(async () => {
  stack = await startStack({ provider: {} })
  const me = await stack.api('GET', '/me')
  const user = await runCorral(['admin', 'user', 'create', '--org', me.body.org.id, '--email', 'member@e2e.test', '--role', 'member', '--json', '--data-dir', stack.serve.dataDir])
  expect(user.code, user.stderr).toBe(0)
  const u = JSON.parse(user.stdout)
  member = { id: u.user.id, token: u.token }
}, 60_000)
afterAll(() => stack?.close())

const admin = (...args: string[]) => stack.corral(args)
const asMember = (args: string[], input?: string) =>
  runCorral(args, { env: { ...stack.cliEnv, CORRAL_TOKEN: member.token }, ...(input !== undefined ? { input } : {}) })
const oneLine = (s: string) => s.trim().split('\n').length === 1

const CAPS = `- name: github
  type: http
  allow:
    - name: api
      domains: [api.github.com]
      methods: [GET]
  transforms:
    - name: gh-auth
      applies_to: [api]
      auth: { credential: github-bot, provider: github }
    - name: npm-auth
      applies_to: [api]
      auth: { credential: npm-token, provider: npm }
    - name: tenant
      applies_to: [api]
      header: { name: x-tenant, action: set, value: 'secrets["tenant_id"]' }
`

describe('corral credential, role warnings and caps lint --api-url', { timeout: 180_000 }, () => {
  it('creates org and personal credentials, lists them with status and owner, shows one', async () => {
    const org = await stack.corral(['credential', 'create', 'github-bot', '--provider', 'github', '--kind', 'static_token', '--secret-stdin', '--json'], { input: ORG_TOKEN })
    expect(org.code, org.stderr).toBe(0)
    const orgCred = JSON.parse(org.stdout)
    expect(orgCred).toMatchObject({ name: 'github-bot', status: 'active' })
    expect(orgCred.owner_user_id).toBeUndefined()

    const mine = await asMember(['credential', 'create', 'github-bot', '--provider', 'github', '--kind', 'static_token', '--secret-stdin', '--personal'], MY_TOKEN)
    expect(mine.code, mine.stderr).toBe(0)
    expect(mine.stdout).toMatch(/^Credential github-bot \(cred_\w+, personal\) created for github \[static_token\]\.\n$/)

    const refused = await asMember(['credential', 'create', 'shared', '--provider', 'github', '--kind', 'static_token', '--secret', 'x'])
    expect(refused.code).toBe(1)
    expect(oneLine(refused.stderr)).toBe(true)
    expect(refused.stderr).toContain('permission_denied')

    const list = await admin('credential', 'list')
    expect(list.code, list.stderr).toBe(0)
    expect(list.stdout).toMatch(/^NAME\s+PROVIDER\s+KIND\s+STATUS\s+OWNER\s+ID/)
    expect(list.stdout).toMatch(/github-bot\s+github\s+static_token\s+active\s+org\s+cred_/)
    expect(list.stdout).toMatch(new RegExp(`github-bot\\s+github\\s+static_token\\s+active\\s+${member.id}\\s+cred_`))
    const memberList = JSON.parse((await asMember(['credential', 'list', '--json'])).stdout)
    expect(memberList.map((c: any) => c.owner_user_id)).toEqual([member.id])

    const ambiguous = await admin('credential', 'show', 'github-bot')
    expect(ambiguous.code).toBe(1)
    expect(oneLine(ambiguous.stderr)).toBe(true)
    expect(ambiguous.stderr).toContain('2 credentials are named github-bot')
    const byId = await admin('credential', 'show', orgCred.id)
    expect(byId.code, byId.stderr).toBe(0)
    expect(byId.stdout).toMatch(/^id\s+cred_/)
    expect(byId.stdout).toMatch(/owner\s+org\n/)
    const memberShow = JSON.parse((await asMember(['credential', 'show', 'github-bot', '--json'])).stdout)
    expect(memberShow).toMatchObject({ name: 'github-bot', owner_user_id: member.id, status: 'active' })
    const missing = await admin('credential', 'show', 'nope')
    expect(missing.code).toBe(1)
    expect(oneLine(missing.stderr)).toBe(true)

    for (const r of [org, mine, list, byId]) expect(r.stdout + r.stderr).not.toMatch(/ghp_(org|member)_e2e/)

    // The member deletes their own by name; the org's stays.
    const del = await asMember(['credential', 'delete', 'github-bot', '--json'])
    expect(del.code, del.stderr).toBe(0)
    expect(JSON.parse(del.stdout)).toEqual({ id: memberShow.id, status: 'deleted' })
    expect(JSON.parse((await admin('credential', 'list', '--json')).stdout).map((c: any) => c.id)).toEqual([orgCred.id])
  })

  it('refuses flags that do not fit the kind with one usage line (exit 2)', async () => {
    const cases = [
      ['credential', 'create', 'x', '--provider', 'google', '--kind', 'oauth', '--secret', 't'],
      ['credential', 'create', 'x', '--provider', 'github', '--kind', 'static_token', '--client-id', 'c', '--secret', 't'],
      ['credential', 'create', 'x', '--provider', 'google', '--kind', 'oauth', '--client-id', 'c'],
      ['credential', 'create', 'x', '--provider', 'google', '--kind', 'oauth', '--client-id', 'c', '--client-secret-stdin'],
      ['credential', 'create', 'x', '--provider', 'github', '--kind', 'static_token'],
    ]
    for (const args of cases) {
      const r = await admin(...args)
      expect(r.code, args.join(' ')).toBe(2)
      expect(oneLine(r.stderr), r.stderr).toBe(true)
    }
  })

  it('role create and update save a role that names missing material and warn once per name', async () => {
    writeFileSync(join(stack.dir, 'caps.yaml'), CAPS)
    writeFileSync(join(stack.dir, 'role.yaml'), 'name: warned\nprovider: none\ncapabilities_file: caps.yaml\n')
    const created = await admin('role', 'create', '-f', join(stack.dir, 'role.yaml'))
    expect(created.code, created.stderr).toBe(0)
    expect(created.stdout).toContain('Agent role warned created.')
    const warnings = created.stderr.trim().split('\n')
    expect(warnings).toEqual([
      expect.stringMatching(/^warning: credential npm-token does not exist in this organisation \(named by github\)/),
      expect.stringMatching(/^warning: secret tenant_id does not exist in this organisation \(named by github\)/),
    ])
    writeFileSync(join(stack.dir, 'patch.yaml'), 'description: again\n')
    const updated = await admin('role', 'update', 'warned', '-f', join(stack.dir, 'patch.yaml'), '--json')
    expect(updated.code, updated.stderr).toBe(0)
    expect(JSON.parse(updated.stdout).warnings.map((w: any) => [w.code, w.name])).toEqual([['missing_credential', 'npm-token'], ['missing_secret', 'tenant_id']])
    expect(updated.stderr.trim().split('\n')).toHaveLength(2)
  })

  it('caps lint --api-url checks the names against the org; offline lint does not', async () => {
    const file = join(stack.dir, 'caps.yaml')
    const offline = await admin('caps', 'lint', file)
    expect(offline.code).toBe(0)
    expect(offline.stdout).not.toContain('missing_credential')

    const text = await admin('caps', 'lint', file, '--api-url', stack.serve.url)
    expect(text.code, text.stderr).toBe(0)
    expect(text.stdout).toContain(`${file}: warning missing_credential: credential npm-token does not exist`)
    expect(text.stdout).toContain(`${file}: warning missing_secret: secret tenant_id does not exist`)
    expect(text.stdout).not.toContain('github-bot does not exist')

    const json = await admin('caps', 'lint', file, '--api-url', stack.serve.url, '--json')
    expect(json.code, json.stderr).toBe(0)
    const report = JSON.parse(json.stdout)
    expect(report.files[0]).toMatchObject({ file, valid: true })
    expect(report.org_warnings.map((w: any) => [w.file, w.code, w.name, w.capabilities])).toEqual([
      [file, 'missing_credential', 'npm-token', ['github']], [file, 'missing_secret', 'tenant_id', ['github']],
    ])

    const github = await admin('caps', 'lint', file, '--api-url', stack.serve.url, '--format', 'github')
    expect(github.stdout).toContain(`::warning file=${file},title=missing_credential::credential npm-token`)

    // A member holds no caps:write: one line, exit 1.
    const denied = await asMember(['caps', 'lint', file, '--api-url', stack.serve.url])
    expect(denied.code).toBe(1)
    expect(oneLine(denied.stderr)).toBe(true)
    expect(denied.stderr).toContain('permission_denied')
    const down = await admin('caps', 'lint', file, '--api-url', 'http://127.0.0.1:9')
    expect(down.code).toBe(1)
    expect(oneLine(down.stderr)).toBe(true)
  })
})
