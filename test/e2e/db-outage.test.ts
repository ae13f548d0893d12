// The database goes away under a real `corral serve` (its own throwaway PostgreSQL cluster, never
// the shared one): while it is down every API answer is a 503 envelope with Retry-After (or a
// success served without the database), never a 500 or a hang; the process survives the pool's
// and the LISTEN connection's errors; and once the database is back everything recovers without
// a restart — writes, their audit rows, and live streams (the LISTEN connection reconnects).
import { afterAll, beforeAll, expect, it } from 'vitest'
import { startServe, type RunningServe } from '../helpers/serve.js'
import { describeThrowawayPostgres, startThrowawayPostgres, type ThrowawayPostgres } from '../helpers/throwaway-postgres.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describeThrowawayPostgres('corral serve when PostgreSQL goes away', () => {
  let pg: ThrowawayPostgres
  let serve: RunningServe
  let key: string
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${serve.url}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...init.headers }, signal: AbortSignal.timeout(15_000) })
  const createKey = (label: string) => api('/v1/api-keys', { method: 'POST', body: JSON.stringify({ label, permission_set: 'read_only' }) })

  /** Every answer is a success or the 503 envelope with Retry-After; returns the status. */
  const expectUpOr503 = async (res: Response): Promise<number> => {
    const text = await res.text()
    if (res.status === 503) {
      expect(JSON.parse(text).error).toMatchObject({ code: 'service_unavailable', request_id: expect.stringMatching(/^req_/) })
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0)
    } else expect([200, 201], `${res.status} ${text}`).toContain(res.status)
    return res.status
  }

  beforeAll(async () => {
    pg = await startThrowawayPostgres()
    serve = await startServe({ db: await pg.createDatabase('outage'), args: ['--runtime', 'process'] })
    key = serve.adminKey
    expect((await createKey('before')).status).toBe(201)
  }, 60_000)
  afterAll(async () => {
    await serve?.stop()
    await pg?.destroy()
  })

  it('answers 503 + Retry-After while the database is down, survives, and recovers by itself', async () => {
    // A live stream cannot know what it missed while LISTEN was down: it ends cleanly, and its
    // client resumes with Last-Event-ID (the replay reads the log).
    const before = await api('/v1/activity/stream')
    expect(before.status).toBe(200)
    const ended = (async () => {
      const reader = before.body!.getReader()
      for (let i = 0; i < 1_000; i++) if ((await reader.read()).done) return true
      return false
    })()
    await pg.stop()
    expect(await ended).toBe(true)
    for (const res of await Promise.all([api('/v1/api-keys'), createKey('during'), api('/v1/audit?limit=5'), api('/v1/me'), fetch(`${serve.url}/readyz`)])) {
      expect(await expectUpOr503(res)).toBe(503)
    }
    expect((await fetch(`${serve.url}/healthz`)).status).toBe(200)
    // Background loops (reconcile, audit writer retries, LISTEN reconnects) meet the outage too.
    await sleep(1_500)
    expect(serve.process.exitCode).toBeNull()

    await pg.start()
    let status = 0
    for (let i = 0; i < 100 && status !== 200; i++) {
      status = (await api('/v1/api-keys')).status
      if (status !== 200) await sleep(100)
    }
    expect(status).toBe(200)

    // A live stream is refused (503) until the LISTEN connection is back, then sees a new write.
    let stream = await api('/v1/activity/stream?filter=event_type=api_key_created')
    for (let i = 0; i < 100 && stream.status === 503; i++) {
      await expectUpOr503(stream)
      await sleep(100)
      stream = await api('/v1/activity/stream?filter=event_type=api_key_created')
    }
    expect(stream.status).toBe(200)
    const created = (await (await createKey('after')).json()) as { id: string }
    const reader = stream.body!.getReader()
    let text = ''
    while (!text.includes(created.id)) {
      const { value, done } = await reader.read()
      if (done) break
      text += new TextDecoder().decode(value)
    }
    await reader.cancel()
    expect(text).toContain(created.id)
  }, 60_000)

  it('a restart in the middle of load: every answer is a success or a 503 envelope, then all succeed', async () => {
    let stop = false
    const statuses: number[] = []
    const load = (async () => {
      for (let i = 0; i < 2_000 && !stop; i++) {
        const res = await (i % 2 ? createKey(`load ${i}`) : api('/v1/api-keys?limit=5').catch(() => undefined))
        if (res) statuses.push(await expectUpOr503(res))
      }
    })()
    await sleep(300)
    await pg.restart({ mode: 'immediate' })
    await sleep(300)
    stop = true
    await load.catch((err) => {
      console.log(serve.output().slice(-3000))
      throw err
    })
    expect(statuses.length).toBeGreaterThan(0)
    expect((await createKey('settled')).status).toBe(201)
    expect(serve.process.exitCode).toBeNull()
  }, 60_000)
})
