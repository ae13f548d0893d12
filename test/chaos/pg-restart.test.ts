// PostgreSQL restarted mid-load (issue 14 §2): serve runs on its own throwaway cluster; agents and
// API clients keep going while the database is stopped and started again. The stop is a fast
// shutdown (connections are cut): the throwaway cluster runs with synchronous_commit off, so an
// immediate stop would lose commits it had already acknowledged, a fault of the test database,
// not of serve. While it is down the API answers 503 with the envelope and Retry-After and the
// proxy fails closed (nothing answered 200 without its row); once it is back both recover without
// a restart of serve, and every answered request and 2xx mutation has its row.
import { afterAll, expect, it } from 'vitest'
import { agentLoad, apiLoad, type Tally, auditRows, chaosCaps, missingDecisions, missingMutations, seedWorkspace, sleep, startChaos, type Chaos } from './harness.js'
import { describeThrowawayPostgres, startThrowawayPostgres, type ThrowawayPostgres } from '../helpers/throwaway-postgres.js'

describeThrowawayPostgres('PostgreSQL restarted under load', () => {
  let pgc: ThrowawayPostgres | undefined
  let c: Chaos | undefined
  afterAll(async () => {
    await c?.close()
    await pgc?.destroy()
  })

  it('503 + Retry-After and fail-closed while down, recovery without restarting serve, no answered row lost', async () => {
    pgc = await startThrowawayPostgres()
    c = await startChaos({ db: pgc.url })
    const chaos = c
    const pid = c.serve.process.pid
    const ws = await seedWorkspace(c, chaosCaps(c.upstream.port))
    const before = { stop: new AbortController() }
    const agents = agentLoad({ proxyUrl: () => chaos.proxyUrl, token: ws.token, caPem: ws.caPem, port: c.upstream.port, prefixes: ['chaos'], concurrency: 6, stop: before.stop.signal })
    const api = apiLoad({ url: () => chaos.serve.url, key: c.serve.adminKey, concurrency: 2, stop: before.stop.signal })
    await sleep(800)
    await pgc.stop({ mode: 'fast' })
    const downAt = Date.now()
    // While down: a probe mutation and a probe proxied request, answered (not hung) and refused.
    await sleep(500)
    const probe = await fetch(`${c.serve.url}/v1/secrets`, {
      method: 'POST', headers: { authorization: `Bearer ${c.serve.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'chaos_probe', value: 'x' }), signal: AbortSignal.timeout(15_000),
    }).catch((err: Error) => err)
    if (probe instanceof Error) {
      before.stop.abort()
      await Promise.all([agents, api])
      const p = c.serve.process
      throw new Error(`serve did not answer while PostgreSQL was down (${probe.message}; exit ${p.exitCode ?? p.signalCode ?? 'none'}):\n${c.serve.output().slice(-2000)}`)
    }
    const probeBody = (await probe.json().catch(() => ({}))) as { error?: { code?: string; message?: string } }
    const downStatus = { status: probe.status, retryAfter: probe.headers.get('retry-after'), code: probeBody.error?.code }
    await sleep(Math.max(0, 2_000 - (Date.now() - downAt)))
    await pgc.start()
    const upAt = Date.now()
    // Recovery: a mutation answers 201 and a proxied request 200 within a bounded time, same process.
    let recoveredApiMs = -1
    let recoveredProxyMs = -1
    const recovered = new AbortController()
    const live: Tally = { answered: [], failed: 0 }
    const after = agentLoad({ tally: live, proxyUrl: () => chaos.proxyUrl, token: ws.token, caPem: ws.caPem, port: chaos.upstream.port, prefixes: ['chaos'], concurrency: 1, stop: recovered.signal })
    for (let i = 0; i < 200 && (recoveredApiMs < 0 || recoveredProxyMs < 0); i++) {
      await sleep(100)
      if (recoveredApiMs < 0) {
        const r = await fetch(`${c.serve.url}/v1/secrets`, {
          method: 'POST', headers: { authorization: `Bearer ${c.serve.adminKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ name: `chaos_after_${i}`, value: 'x' }), signal: AbortSignal.timeout(5_000),
        }).catch(() => undefined)
        if (r?.status === 201) recoveredApiMs = Date.now() - upAt
      }
      if (recoveredProxyMs < 0 && live.answered.some((a) => a.status === 200)) recoveredProxyMs = Date.now() - upAt
    }
    before.stop.abort()
    recovered.abort()
    const [t, m, t2] = await Promise.all([agents, api, after])
    const answered = [...t.answered, ...t2.answered]
    let gaps = { missing: [] as string[], duplicated: [] as string[] }
    let lost = { secrets: [] as string[], keys: [] as string[] }
    let allowRows = 0
    // Rows queued while the database was down may be written some seconds after it is back (bounded).
    for (let i = 0; i < 100; i++) {
      const rows = await c.store((s) => auditRows(s, ['policy_decision', 'secret_created', 'api_key_created']))
      allowRows = rows.filter((r) => r.event_type === 'policy_decision' && r.decision === 'allow').length
      gaps = missingDecisions(answered, rows)
      lost = missingMutations(m, rows)
      if (!gaps.missing.length && !lost.secrets.length && !lost.keys.length) break
      await sleep(100)
    }
    if (gaps.missing.length || lost.secrets.length || lost.keys.length) {
      // Where did they go? The quarantine (refused as bad data) and serve's own account.
      const q = await c.store(async (s) => {
        const db = s.db as unknown as import('kysely').Kysely<{ audit_quarantine: { id: string; reason: string } }>
        return db.selectFrom('audit_quarantine').select(['id', 'reason']).execute().catch((e: Error) => [{ id: '?', reason: e.message }])
      })
      console.log(`chaos pg-restart: missing ${JSON.stringify({ decisions: gaps.missing, secrets: lost.secrets, keys: lost.keys })}; quarantine ${JSON.stringify(q)}\n${c.serve.output().slice(-4000)}`)
    }
    const statuses = Object.fromEntries(m.statuses)
    const proxyStatuses: Record<string, number> = {}
    for (const a of answered) proxyStatuses[`${a.status}${a.reason ? ` ${a.reason}` : ''}`] = (proxyStatuses[`${a.status}${a.reason ? ` ${a.reason}` : ''}`] ?? 0) + 1
    console.log(`chaos pg-restart ${JSON.stringify({ down: downStatus, api_statuses: statuses, api_503_with_retry_after: m.retryAfter, api_503_with_envelope: m.envelopes, proxy_statuses: proxyStatuses, recovered_api_ms: recoveredApiMs, recovered_proxy_ms: recoveredProxyMs, upstream_served: c.upstream.served.get('chaos') ?? 0, allow_rows: allowRows, decisions_missing: gaps.missing.length, mutations_missing: lost.secrets.length + lost.keys.length })}`)

    expect(c.serve.process.pid).toBe(pid)
    expect(c.serve.process.exitCode).toBeNull()
    expect(downStatus.status).toBe(503)
    expect(downStatus.retryAfter).toMatch(/^\d+$/)
    expect(typeof downStatus.code).toBe('string')
    // Every 503 the load clients saw was the envelope with Retry-After; no 500s.
    expect(m.retryAfter).toBe(m.statuses.get(503) ?? 0)
    expect(m.envelopes).toBe(m.statuses.get(503) ?? 0)
    expect(m.statuses.get(500) ?? 0).toBe(0)
    expect(recoveredApiMs).toBeGreaterThanOrEqual(0)
    expect(recoveredProxyMs).toBeGreaterThanOrEqual(0)
    expect(gaps.missing).toEqual([])
    expect(gaps.duplicated).toEqual([])
    expect(lost).toEqual({ secrets: [], keys: [] })
    // The proxy's refusals while the store is away are 503s (audit_unavailable / store), never a 500.
    expect(answered.filter((a) => a.status >= 500 && a.status !== 503).map((a) => `${a.status} ${a.reason}`)).toEqual([])
    // Fail closed: nothing reached the upstream without its allow row.
    expect(allowRows).toBeGreaterThanOrEqual(c.upstream.served.get('chaos') ?? 0)
  })
})

