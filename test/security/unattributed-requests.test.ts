// Attack: requests to the proxy port that no org can be named for (no token, a garbage or forged
// token, bytes that are not HTTP, a malformed CONNECT target) against the real `corral serve`
// binary. Before the fix one tokenless request made serve exit 1 (the decision row had no org_id
// and the writer's validation error escaped the request path). Now: serve stays up, every attempt
// gets a deny, and its one row lands in the platform scope (`_platform`), never in an org's log.
import { execFile } from 'node:child_process'
import { connect } from 'node:net'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PLATFORM_ORG } from '../../src/contract/index.js'
import { openStore } from '../../src/store/index.js'
import { runCorral, startServe, type RunningServe } from '../helpers/serve.js'

const run = promisify(execFile)

/** curl through the proxy; resolves with the HTTP status curl saw (000 when none) and the body. */
async function curl(proxyPort: number, url: string, extra: string[] = []): Promise<{ status: string; body: string }> {
  const { stdout } = await run('curl', ['-sk', '-m', '5', '-o', '-', '-w', '\n%{http_code}', '-x', `http://127.0.0.1:${proxyPort}`, ...extra, url]).catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? '\n000' }))
  const nl = stdout.lastIndexOf('\n')
  return { body: stdout.slice(0, nl), status: stdout.slice(nl + 1) }
}

/** Writes raw bytes to the proxy port; resolves with everything it answered before closing. */
function raw(port: number, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => s.write(bytes))
    let got = ''
    s.on('data', (c) => (got += String(c)))
    s.on('error', () => {})
    s.setTimeout(5_000, () => s.destroy())
    s.on('close', () => resolve(got))
  })
}

describe('unattributed proxy requests against the real serve', () => {
  let serve: RunningServe
  let proxyPort: number

  beforeAll(async () => {
    serve = await startServe()
    proxyPort = Number(/proxy http:\/\/127\.0\.0\.1:(\d+)/.exec(serve.output())![1])
  })
  afterAll(async () => {
    await serve.stop()
  })

  const alive = async (): Promise<void> => {
    expect(serve.process.exitCode).toBeNull()
    expect((await fetch(`${serve.url}/healthz`)).status).toBe(200)
  }

  it('a CONNECT with no token: 407 no_token (a Basic challenge), and serve stays up', async () => {
    const res = await raw(proxyPort, 'CONNECT localhost:1234 HTTP/1.1\r\nhost: localhost:1234\r\n\r\n')
    expect(res).toMatch(/^HTTP\/1\.1 407 /)
    expect(res).toMatch(/proxy-authenticate: Basic realm="corral"/i)
    expect(JSON.parse(res.slice(res.indexOf('\r\n\r\n') + 4)).error.reason).toBe('no_token')
    await alive()
  })

  it('plain HTTP with no token, and a garbage token over CONNECT and plain HTTP', async () => {
    expect((await curl(proxyPort, 'http://localhost:1234/plain')).status).toBe('407')
    await alive()
    const bad = ['--proxy-header', 'Proxy-Authorization: Bearer not.a.token']
    const tunnelled = await curl(proxyPort, 'https://localhost:1234/garbage', bad)
    expect(JSON.parse(tunnelled.body).error.reason).toBe('invalid_token')
    const plain = await curl(proxyPort, 'http://localhost:1234/garbage-plain', bad)
    expect(JSON.parse(plain.body).error.reason).toBe('invalid_token')
    await alive()
  })

  it('bytes that are not HTTP and a malformed CONNECT target: 400, serve stays up', async () => {
    expect(await raw(proxyPort, '\x16\x03\x01garbage\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /)
    expect(await raw(proxyPort, 'CONNECT no-port.example HTTP/1.1\r\nhost: x\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /)
    await alive()
  })

  it('every attempt has exactly one row, in the platform scope and in no org', async () => {
    // The default org's log (the owner key) holds none of them.
    const orgLog = await fetch(`${serve.url}/v1/audit?filter=event_type=policy_decision`, { headers: { authorization: `Bearer ${serve.adminKey}` } })
    expect(orgLog.status).toBe(200)
    expect(((await orgLog.json()) as { events: unknown[] }).events).toEqual([])
    const code = await serve.stop({ keepDataDir: true })
    expect(code).toBe(0)
    const store = await openStore(`sqlite:${join(serve.dataDir, 'corral.db')}`)
    try {
      const rows = await store.db.selectFrom('audit_events').select(['org_id', 'user_id', 'reason', 'path', 'decision', 'method']).where('event_type', '=', 'policy_decision').execute()
      for (const r of rows) expect(r).toMatchObject({ org_id: PLATFORM_ORG, user_id: 'system', decision: 'deny' })
      const byPath = (p: string) => rows.filter((r) => r.path === p).map((r) => r.reason)
      // The tokenless CONNECT, answered 407: its row has the method and no path.
      expect(rows.filter((r) => r.method === 'CONNECT' && r.reason === 'no_token')).toHaveLength(1)
      expect(byPath('/plain')).toEqual(['no_token'])
      expect(byPath('/garbage')).toEqual(['invalid_token'])
      expect(byPath('/garbage-plain')).toEqual(['invalid_token'])
      // The two transport violations and the 407 challenge: one row each, no path.
      expect(rows.filter((r) => !r.path).map((r) => r.reason).sort()).toEqual(['no_scheme', 'no_scheme', 'no_token'])
      expect(rows).toHaveLength(6)
      // Where an operator reads them: `corral admin audit query` (the platform scope).
      const cli = await runCorral(['admin', 'audit', 'query', '--data-dir', serve.dataDir, '--filter', 'event_type=policy_decision', '--json'])
      expect(cli.code).toBe(0)
      const page = JSON.parse(cli.stdout) as { events: Array<{ org_id: string; reason: string }> }
      expect(page.events).toHaveLength(6)
      for (const e of page.events) expect(e.org_id).toBe(PLATFORM_ORG)
    } finally {
      await store.close()
      rmSync(serve.dataDir, { recursive: true, force: true })
    }
  })
})
