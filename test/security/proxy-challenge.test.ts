// Attack catalogue, clients that wait for a proxy challenge: git (libcurl's "any" proxy auth)
// sends its CONNECT without credentials and supplies the token only after a 407. Before the fix
// the proxy opened the tunnel anyway and denied `no_token` inside it, in a row no org could see,
// and git failed. Now a CONNECT without a credential the proxy can read is answered `407` with
// `Proxy-Authenticate: Basic realm="corral"` and closed; the retry with the token gets its tunnel
// and its rows land in the token's org. Shapes: the real `git clone` over HTTPS through the proxy
// (smart HTTP from `git http-backend`), curl's --proxy-anyauth, and raw CONNECTs with no header,
// an empty one, schemes the proxy does not read, malformed base64, a good token; the 407's row is
// rate limited. The same for plain HTTP (absolute-form `GET http://…`, an `allow_insecure` rule):
// before, a request without credentials was answered `403 no_token` and git, curl --proxy-anyauth
// and their kind failed; now the request-headers phase answers it `407` with the same challenge,
// body and row (the 407s of both kinds share one row allowance). Shapes: `git clone http://…`,
// curl --proxy-anyauth, raw requests with each header shape, a bad token (still invalid_token),
// `GET https://…` over the plaintext leg (still no_scheme), an agent callback to corral.internal.
import { execFile, spawn } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { PLATFORM_ORG, type AgentCallbackHandler, type AuditEvent, type NewAuditEvent } from '../../src/contract/index.js'
import { AuditUnavailableError } from '../../src/audit/index.js'
import { RecordingAudit, startHarness, type Harness } from '../proxy/harness.js'
import { connectRequest, plainRequest } from './raw.js'

const run = promisify(execFile)

const CAPS = `
- name: code
  type: http
  allow:
    - name: repo
      domains: ["127.0.0.1"]
      methods: [GET, POST]
      paths: ["/repo.git/**"]
    - name: plainrepo
      domains: ["127.0.0.1"]
      methods: [GET, POST]
      paths: ["/repo.git/**"]
      allow_insecure: true
`

/** A hermetic environment for git and curl: no user or system config, no proxy of the machine's. */
function toolEnv(home: string): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: home, GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0', LANG: 'C' }
}

/** `git http-backend` as a CGI behind the harness's HTTPS upstream (smart HTTP). */
function gitBackend(root: string): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const url = new URL(req.url!, 'https://upstream')
    const child = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH, GIT_PROJECT_ROOT: root, GIT_HTTP_EXPORT_ALL: '1', REQUEST_METHOD: req.method!, PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1), CONTENT_TYPE: String(req.headers['content-type'] ?? ''), REMOTE_ADDR: '127.0.0.1',
        ...(req.headers['content-length'] ? { CONTENT_LENGTH: String(req.headers['content-length']) } : {}),
        ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) } : {}),
        ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
      },
    })
    req.pipe(child.stdin)
    const out: Buffer[] = []
    child.stdout.on('data', (d: Buffer) => out.push(d))
    child.on('close', () => {
      const all = Buffer.concat(out)
      const end = all.indexOf('\r\n\r\n')
      const head = all.subarray(0, end).toString().split('\r\n')
      let status = 200
      for (const line of head) {
        const i = line.indexOf(':')
        const [k, v] = [line.slice(0, i), line.slice(i + 1).trim()]
        if (k.toLowerCase() === 'status') status = Number(v.split(' ')[0])
        else res.setHeader(k, v)
      }
      res.writeHead(status).end(all.subarray(end + 4))
    })
  }
}

describe('clients that wait for a proxy challenge', () => {
  let h: Harness
  let token = ''
  let workspaceId = ''
  let dir = ''
  let caFile = ''
  let before = 0
  const proxyPort = (): number => Number(new URL(h.proxyUrl).port)
  const newRows = (): AuditEvent[] => h.audit.decisions().slice(before)
  const rows = async (n: number): Promise<AuditEvent[]> => (await h.audit.waitForDecisions(before + n)).slice(before)

  beforeAll(async () => {
    h = await startHarness({ limits: { transportRowsPerSecond: 2 } })
    ;({ token, workspaceId } = await h.workspace(CAPS))
    dir = await mkdtemp(join(tmpdir(), 'corral-challenge-'))
    caFile = join(dir, 'corral-ca.pem')
    await writeFile(caFile, h.proxy.ca.certPem)
    // A bare repository with one commit, served by git http-backend.
    const env = toolEnv(dir)
    const git = (...args: string[]) => run('git', args, { env, cwd: dir })
    await git('init', '-q', '--bare', '-b', 'main', 'repo.git')
    await git('init', '-q', '-b', 'main', 'work')
    await writeFile(join(dir, 'work', 'README'), 'cloned through corral\n')
    await git('-C', 'work', 'add', 'README')
    await git('-C', 'work', '-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'first')
    await git('-C', 'work', 'push', '-q', join(dir, 'repo.git'), 'main')
    h.up.handler.current = gitBackend(dir)
  })
  afterAll(async () => {
    await h?.close()
    if (dir) await rm(dir, { recursive: true, force: true })
  })
  beforeEach(async () => {
    // Each test starts with a full row budget (the 407 rows are rate limited).
    await new Promise((r) => setTimeout(r, 1_100))
    before = h.audit.decisions().length
  })

  it('git clone over HTTPS: the bare CONNECT gets 407, the retry carries the token, the clone succeeds and its rows are the org\'s', async () => {
    const dest = join(dir, `clone-${Date.now()}`)
    const proxy = `http://agent:${token}@127.0.0.1:${proxyPort()}`
    const res = await run('git', ['-c', `http.proxy=${proxy}`, '-c', `http.sslCAInfo=${caFile}`, 'clone', '-q', `https://127.0.0.1:${h.up.httpsPort}/repo.git`, dest], { env: toolEnv(dir) })
      .then(() => ({ ok: true, stderr: '' }), (e: { stderr?: string }) => ({ ok: false, stderr: e.stderr ?? '' }))
    expect(res).toEqual({ ok: true, stderr: '' })
    expect(await readFile(join(dest, 'README'), 'utf8')).toBe('cloned through corral\n')
    await rows(3)
    const all = newRows()
    const challenged = all.filter((r) => r.method === 'CONNECT')
    const inTunnel = all.filter((r) => r.method !== 'CONNECT')
    // git probed without credentials at least once and was challenged: platform scope, no_token.
    expect(challenged.length).toBeGreaterThanOrEqual(1)
    for (const r of challenged) expect(r).toMatchObject({ org_id: PLATFORM_ORG, decision: 'deny', reason: 'no_token', detail: { challenge: 'basic' } })
    // Every request inside a tunnel came with the token: allowed, in the org, with the upstream's answer.
    expect(inTunnel.map((r) => [r.method, (r.path ?? '').replace(/\/repo\.git/, '')])).toEqual(expect.arrayContaining([['GET', '/info/refs'], ['POST', '/git-upload-pack']]))
    for (const r of inTunnel) expect(r).toMatchObject({ org_id: h.orgId, workspace_id: workspaceId, decision: 'allow', detail: { upstream_status: 200, response_complete: true } })
  })

  it('curl --proxy-anyauth does the same handshake; plain curl without a token gets the 407 and its challenge', async () => {
    const env = toolEnv(dir)
    const url = `https://127.0.0.1:${h.up.httpsPort}/repo.git/info/refs?service=git-upload-pack`
    const anyauth = await run('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '--cacert', caFile, '--proxy-anyauth', '-x', `http://127.0.0.1:${proxyPort()}`, '-U', `agent:${token}`, url], { env })
    expect(anyauth.stdout).toBe('200')
    const bare = await run('curl', ['-s', '-D', '-', '-o', '/dev/null', '--cacert', caFile, '-x', `http://127.0.0.1:${proxyPort()}`, url], { env }).catch((e: { stdout: string }) => ({ stdout: e.stdout }))
    expect(bare.stdout).toMatch(/^HTTP\/1\.1 407 Proxy Authentication Required\r\n/)
    expect(bare.stdout.toLowerCase()).toContain('proxy-authenticate: basic realm="corral"')
  })

  describe('raw CONNECT shapes', () => {
    const connectWith = (proxyAuthorization: string | null) =>
      connectRequest({ proxyPort: proxyPort(), authority: `127.0.0.1:${h.up.httpsPort}`, token: '', caPem: h.proxy.ca.certPem, target: '/repo.git/info/refs', proxyAuthorization })

    for (const [what, header, reason] of [
      ['no Proxy-Authorization at all', null, 'no_token'],
      ['an empty Proxy-Authorization', 'Proxy-Authorization:', 'no_token'],
      ['only blanks', 'Proxy-Authorization:    ', 'no_token'],
      ['a scheme the proxy does not read (Digest)', 'Proxy-Authorization: Digest username="agent", realm="corral"', 'invalid_token'],
      ['a scheme the proxy does not read (NTLM)', 'Proxy-Authorization: NTLM TlRMTVNTUAABAAAAB4IIAAAAAAAAAAAAAAAAAAAAAAA=', 'invalid_token'],
      ['a scheme with no credentials after it', 'Proxy-Authorization: Negotiate', 'invalid_token'],
    ] as const) {
      it(`${what}: 407 with a Basic challenge, the connection closed, one platform-scope row`, async () => {
        const res = await connectWith(header)
        expect(res.status).toBe(407)
        expect(res.headers['proxy-authenticate']).toBe('Basic realm="corral"')
        expect(res.headers.connection).toBe('close')
        expect(res.headers['x-corral-deny-reason']).toBe(reason)
        expect(JSON.parse(res.body).error).toMatchObject({ code: 'policy_denied', reason })
        const [row] = await rows(1)
        expect(row).toMatchObject({ org_id: PLATFORM_ORG, user_id: 'system', decision: 'deny', reason, method: 'CONNECT', destination: '127.0.0.1', path: '', detail: { challenge: 'basic' } })
        expect(newRows()).toHaveLength(1)
      })
    }

    for (const [what, header] of [
      ['Basic with malformed base64', 'Proxy-Authorization: Basic !!!not*base64'],
      ['Basic without a password', `Proxy-Authorization: Basic ${Buffer.from('agent:').toString('base64')}`],
      ['a Bearer that is not a token', 'Proxy-Authorization: Bearer not.a.token'],
    ] as const) {
      it(`${what}: a credential was presented, so the tunnel opens and the request inside is denied invalid_token (readable, one row)`, async () => {
        const res = await connectWith(header)
        expect(res.status).toBe(403)
        expect(JSON.parse(res.body).error.reason).toBe('invalid_token')
        const [row] = await rows(1)
        expect(row).toMatchObject({ org_id: PLATFORM_ORG, reason: 'invalid_token', method: 'GET', path: '/repo.git/info/refs' })
      })
    }

    it('the token as the Basic password (what HTTPS_PROXY=http://x:TOKEN@proxy sends) and as Bearer: the tunnel opens, rows in the org', async () => {
      for (const header of [`Proxy-Authorization: Basic ${Buffer.from(`agent:${token}`).toString('base64')}`, `Proxy-Authorization: Bearer ${token}`]) {
        const res = await connectWith(header)
        expect(res.status).toBe(200)
      }
      const r = await rows(2)
      for (const row of r) expect(row).toMatchObject({ org_id: h.orgId, workspace_id: workspaceId, decision: 'allow', detail: { upstream_status: 200 } })
    })
  })

  it('git clone over plain HTTP (allow_insecure): the bare GET gets 407, the retry carries the token, the clone succeeds and its rows are the org\'s', async () => {
    const dest = join(dir, `plain-clone-${Date.now()}`)
    const proxy = `http://agent:${token}@127.0.0.1:${proxyPort()}`
    const res = await run('git', ['-c', `http.proxy=${proxy}`, 'clone', '-q', `http://127.0.0.1:${h.up.httpPort}/repo.git`, dest], { env: toolEnv(dir) })
      .then(() => ({ ok: true, stderr: '' }), (e: { stderr?: string }) => ({ ok: false, stderr: e.stderr ?? '' }))
    expect(res).toEqual({ ok: true, stderr: '' })
    expect(await readFile(join(dest, 'README'), 'utf8')).toBe('cloned through corral\n')
    await rows(3)
    const all = newRows()
    const challenged = all.filter((r) => r.decision === 'deny')
    const allowed = all.filter((r) => r.decision === 'allow')
    expect(challenged.length).toBeGreaterThanOrEqual(1)
    for (const r of challenged) expect(r).toMatchObject({ org_id: PLATFORM_ORG, user_id: 'system', reason: 'no_token', destination: '127.0.0.1', detail: { challenge: 'basic' } })
    expect(allowed.map((r) => [r.method, (r.path ?? '').replace(/\/repo\.git/, '')])).toEqual(expect.arrayContaining([['GET', '/info/refs'], ['POST', '/git-upload-pack']]))
    for (const r of allowed) expect(r).toMatchObject({ org_id: h.orgId, workspace_id: workspaceId, capability_name: 'code', detail: { upstream_status: 200, response_complete: true } })
  })

  it('curl --proxy-anyauth over plain HTTP: 407 first, then 200 with its row in the org; plain curl without a token gets the 407 and its challenge', async () => {
    const env = toolEnv(dir)
    const url = `http://127.0.0.1:${h.up.httpPort}/repo.git/info/refs?service=git-upload-pack`
    const anyauth = await run('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '--proxy-anyauth', '-x', `http://127.0.0.1:${proxyPort()}`, '-U', `agent:${token}`, url], { env })
    expect(anyauth.stdout).toBe('200')
    const [probe, allowed] = await rows(2)
    expect(probe).toMatchObject({ org_id: PLATFORM_ORG, decision: 'deny', reason: 'no_token', method: 'GET', path: '/repo.git/info/refs', detail: { challenge: 'basic' } })
    expect(allowed).toMatchObject({ org_id: h.orgId, workspace_id: workspaceId, decision: 'allow', method: 'GET', path: '/repo.git/info/refs', detail: { upstream_status: 200 } })
    const bare = await run('curl', ['-s', '-D', '-', '-o', '/dev/null', '-x', `http://127.0.0.1:${proxyPort()}`, url], { env }).catch((e: { stdout: string }) => ({ stdout: e.stdout }))
    expect(bare.stdout).toMatch(/^HTTP\/1\.1 407 Proxy Authentication Required\r\n/)
    expect(bare.stdout.toLowerCase()).toContain('proxy-authenticate: basic realm="corral"')
    expect(newRows()).toHaveLength(3)
  })

  describe('raw plain-HTTP shapes', () => {
    const plainWith = (proxyAuthorization: string | null, target = `http://127.0.0.1:${h.up.httpPort}/repo.git/info/refs`) =>
      plainRequest({ proxyPort: proxyPort(), target, token: '', proxyAuthorization })

    for (const [what, header, reason] of [
      ['no Proxy-Authorization at all', null, 'no_token'],
      ['an empty Proxy-Authorization', 'Proxy-Authorization:', 'no_token'],
      ['only blanks', 'Proxy-Authorization:    ', 'no_token'],
      ['a scheme the proxy does not read (Digest)', 'Proxy-Authorization: Digest username="agent", realm="corral"', 'invalid_token'],
      ['a scheme the proxy does not read (NTLM)', 'Proxy-Authorization: NTLM TlRMTVNTUAABAAAAB4IIAAAAAAAAAAAAAAAAAAAAAAA=', 'invalid_token'],
      ['a scheme with no credentials after it', 'Proxy-Authorization: Negotiate', 'invalid_token'],
    ] as const) {
      it(`${what}: 407 with a Basic challenge and the CONNECT's deny body, one platform-scope row`, async () => {
        const res = await plainWith(header)
        expect(res.status).toBe(407)
        expect(res.headers['proxy-authenticate']).toBe('Basic realm="corral"')
        expect(res.headers['x-corral-deny-reason']).toBe(reason)
        expect(JSON.parse(res.body)).toEqual({ error: { code: 'policy_denied', reason, message: expect.any(String), phase: 'request_headers', detail: { challenge: 'basic' } } })
        const [row] = await rows(1)
        expect(row).toMatchObject({ org_id: PLATFORM_ORG, user_id: 'system', decision: 'deny', reason, phase: 'request_headers', method: 'GET', destination: '127.0.0.1', path: '/repo.git/info/refs', detail: { challenge: 'basic' } })
        expect(newRows()).toHaveLength(1)
      })
    }

    for (const [what, header] of [
      ['Basic with malformed base64', 'Proxy-Authorization: Basic !!!not*base64'],
      ['Basic without a password', `Proxy-Authorization: Basic ${Buffer.from('agent:').toString('base64')}`],
      ['a Bearer that is not a token', 'Proxy-Authorization: Bearer not.a.token'],
    ] as const) {
      it(`${what}: a credential was presented, so the answer stays 403 invalid_token, no challenge (one row)`, async () => {
        const res = await plainWith(header)
        expect(res.status).toBe(403)
        expect(res.headers['proxy-authenticate']).toBeUndefined()
        expect(JSON.parse(res.body).error.reason).toBe('invalid_token')
        const [row] = await rows(1)
        expect(row).toMatchObject({ org_id: PLATFORM_ORG, reason: 'invalid_token', method: 'GET', path: '/repo.git/info/refs' })
        expect(row!.detail?.challenge).toBeUndefined()
      })
    }

    it('the token as the Basic password and as Bearer: forwarded, rows in the org', async () => {
      for (const header of [`Proxy-Authorization: Basic ${Buffer.from(`agent:${token}`).toString('base64')}`, `Proxy-Authorization: Bearer ${token}`]) {
        const res = await plainWith(header)
        expect(res.status).toBe(200)
      }
      const r = await rows(2)
      for (const row of r) expect(row).toMatchObject({ org_id: h.orgId, workspace_id: workspaceId, decision: 'allow', detail: { upstream_status: 200 } })
    })

    it('`GET https://…` on the plaintext leg without credentials stays 403 no_scheme: a token would not change the answer', async () => {
      const res = await plainWith(null, `https://127.0.0.1:${h.up.httpsPort}/repo.git/info/refs`)
      expect(res.status).toBe(403)
      expect(res.headers['proxy-authenticate']).toBeUndefined()
      expect(JSON.parse(res.body).error.reason).toBe('no_scheme')
      const [row] = await rows(1)
      expect(row).toMatchObject({ org_id: PLATFORM_ORG, reason: 'no_scheme' })
    })
  })

  it('a flood of bare plain requests and CONNECTs: each is answered 407, their rows share one allowance and the suppressed ones are counted on the next row', async () => {
    const N = 30
    for (let i = 0; i < N; i++) {
      const res = i % 2
        ? await plainRequest({ proxyPort: proxyPort(), target: `http://127.0.0.1:${h.up.httpPort}/repo.git/x`, token: '', proxyAuthorization: null })
        : await connectRequest({ proxyPort: proxyPort(), authority: `127.0.0.1:${h.up.httpsPort}`, token: '', caPem: h.proxy.ca.certPem, target: '/', proxyAuthorization: null })
      expect(res.status).toBe(407)
    }
    const written = newRows().length
    expect(written).toBeLessThan(N)
    await new Promise((r) => setTimeout(r, 1_100))
    expect((await plainRequest({ proxyPort: proxyPort(), target: `http://127.0.0.1:${h.up.httpPort}/repo.git/x`, token: '', proxyAuthorization: null })).status).toBe(407)
    const all = await rows(written + 1)
    const suppressed = all.reduce((n, r) => n + Number(r.detail?.suppressed ?? 0), 0)
    expect(all.length + suppressed).toBe(N + 1)
    expect(all.at(-1)).toMatchObject({ method: 'GET', reason: 'no_token', detail: { challenge: 'basic' } })
  })

  it('a flood of bare CONNECTs: each is answered 407, rows are rate limited and the suppressed ones are counted on the next row', async () => {
    const bare = (): Promise<string> => new Promise((resolve) => {
      const s = connect(proxyPort(), '127.0.0.1', () => s.write(`CONNECT 127.0.0.1:${h.up.httpsPort} HTTP/1.1\r\nHost: x\r\n\r\n`))
      let got = ''
      s.on('data', (d) => (got += String(d)))
      s.on('error', () => {})
      s.setTimeout(5_000, () => s.destroy())
      s.on('close', () => resolve(got))
    })
    const N = 30
    for (let i = 0; i < N; i++) expect(await bare()).toMatch(/^HTTP\/1\.1 407 /)
    const written = newRows().length
    expect(written).toBeLessThan(N)
    await new Promise((r) => setTimeout(r, 1_100))
    expect(await bare()).toMatch(/^HTTP\/1\.1 407 /)
    const all = await rows(written + 1)
    const suppressed = all.reduce((n, r) => n + Number(r.detail?.suppressed ?? 0), 0)
    // Every attempt is accounted for: a row, or a count on a later row.
    expect(all.length + suppressed).toBe(N + 1)
  })
})

describe('a challenge is an answer like any other', () => {
  it('while the audit log refuses rows, a bare CONNECT is answered 503 audit_unavailable, not 407', async () => {
    class Refusing extends RecordingAudit {
      override async emit(_event: NewAuditEvent): Promise<AuditEvent> {
        throw new AuditUnavailableError('queue_full', 2, 'the audit log is not keeping up')
      }
    }
    const h = await startHarness({ audit: new Refusing() })
    try {
      const res = await connectRequest({ proxyPort: Number(new URL(h.proxyUrl).port), authority: `127.0.0.1:${h.up.httpsPort}`, token: '', caPem: h.proxy.ca.certPem, target: '/', proxyAuthorization: null })
      expect(res.status).toBe(503)
      expect(res.headers['retry-after']).toBe('2')
      expect(res.headers['proxy-authenticate']).toBeUndefined()
      expect(JSON.parse(res.body).error.reason).toBe('audit_unavailable')
      const plain = await plainRequest({ proxyPort: Number(new URL(h.proxyUrl).port), target: `http://127.0.0.1:${h.up.httpPort}/`, token: '', proxyAuthorization: null })
      expect(plain.status).toBe(503)
      expect(plain.headers['retry-after']).toBe('2')
      expect(plain.headers['proxy-authenticate']).toBeUndefined()
      expect(JSON.parse(plain.body).error.reason).toBe('audit_unavailable')
    } finally {
      await h.close()
    }
  })

  it('an agent callback to corral.internal over plain HTTP without credentials is challenged too; with the token it reaches the handler', async () => {
    const seen: string[] = []
    const handler: AgentCallbackHandler = {
      async handle(_claims, method, path) {
        seen.push(`${method} ${path}`)
        return { status: 202, body: { status: 'accepted' } }
      },
    }
    const h = await startHarness({ agentCallbacks: () => handler })
    try {
      const { workspaceId } = await h.workspace(null)
      const token = await h.token(workspaceId)
      const port = Number(new URL(h.proxyUrl).port)
      const bare = await plainRequest({ proxyPort: port, target: 'http://corral.internal/tasks/next', token: '', proxyAuthorization: null })
      expect(bare.status).toBe(407)
      expect(bare.headers['proxy-authenticate']).toBe('Basic realm="corral"')
      expect(seen).toEqual([])
      const [row] = await h.audit.waitForDecisions(1)
      expect(row).toMatchObject({ org_id: PLATFORM_ORG, reason: 'no_token', destination: 'corral.internal', path: '/tasks/next', detail: { challenge: 'basic' } })
      const forged = await plainRequest({ proxyPort: port, target: 'http://corral.internal/tasks/next', token: 'not.a.token' })
      expect([forged.status, JSON.parse(forged.body).error.reason]).toEqual([403, 'invalid_token'])
      const basic = `Proxy-Authorization: Basic ${Buffer.from(`agent:${token}`).toString('base64')}`
      expect((await plainRequest({ proxyPort: port, target: 'http://corral.internal/tasks/next', token: '', proxyAuthorization: basic })).status).toBe(202)
      expect(seen).toEqual(['GET /tasks/next'])
    } finally {
      await h.close()
    }
  })
})
