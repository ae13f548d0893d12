// Readiness while draining (docs/kubernetes.md "Upgrade"): from SIGTERM on, /readyz answers 503
// at once while, for CORRAL_DRAIN_DELAY_MS, liveness and the API are still served — the window in
// which a Service stops routing to the pod — then serve drains and exits 0 as before.
import { afterAll, describe, expect, it } from 'vitest'
import { drainDelayMs } from '../../src/serve/config.js'
import { startServe, type RunningServe } from '../helpers/serve.js'

describe('readiness while draining', () => {
  let serve: RunningServe | undefined
  afterAll(async () => {
    await serve?.stop()
  })

  it('SIGTERM turns /readyz to 503 while /healthz and the API still answer, then exits 0', async () => {
    serve = await startServe({ env: { CORRAL_DRAIN_DELAY_MS: '3000' }, args: ['--runtime', 'process'] })
    const s = serve
    expect((await fetch(`${s.url}/readyz`)).status).toBe(200)
    const exited = new Promise<number | null>((r) => s.process.once('exit', (code) => r(code)))
    s.process.kill('SIGTERM')
    let ready = 200
    let body: { error?: { code?: string } } = {}
    for (let i = 0; i < 100 && ready === 200; i++) {
      await new Promise((r) => setTimeout(r, 20))
      const res = await fetch(`${s.url}/readyz`)
      ready = res.status
      body = (await res.json()) as typeof body
    }
    expect(ready).toBe(503)
    expect(body.error?.code).toBe('service_unavailable')
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200)
    expect((await fetch(`${s.url}/v1/me`, { headers: { authorization: `Bearer ${s.adminKey}` } })).status).toBe(200)
    expect(await exited).toBe(0)
  }, 30_000)

  it('CORRAL_DRAIN_DELAY_MS is whole milliseconds from 0 to 60000, 0 when unset', () => {
    expect(drainDelayMs(undefined)).toBe(0)
    expect(drainDelayMs('2500')).toBe(2500)
    for (const bad of ['-1', '1.5', 'soon', '60001']) expect(() => drainDelayMs(bad)).toThrow(/^CORRAL_DRAIN_DELAY_MS must be whole milliseconds from 0 to 60000/)
  })
})
