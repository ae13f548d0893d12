// serve killed with SIGKILL while the OTLP receiver holds a request it has already taken (the
// window between the receiver's acknowledgement and the cursor's update): the next serve on the same
// data sends that batch again from the stored cursor and then the rest. Nothing is missing; the
// only repeats are the batch that was in flight, each with its row id (docs/audit.md "Delivery").
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { OtlpReceiver } from '../audit/otlp-receiver.js'
import { startServe, type RunningServe } from '../helpers/serve.js'
import { chaosDialects } from './dialects.js'

async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

async function logIds(serve: RunningServe): Promise<string[]> {
  const res = await fetch(`${serve.url}/v1/audit?order=asc&limit=10000`, { headers: { authorization: `Bearer ${serve.adminKey}` } })
  const body = (await res.json()) as { events: Array<{ id: string }> }
  return body.events.map((e) => e.id)
}

for (const d of chaosDialects('audit-sink-kill9')) {
  describe(`audit sink: kill -9 between the receiver's 2xx and the cursor [${d.name}]`, () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'corral-sink-kill9-'))
    afterAll(async () => {
      rmSync(dataDir, { recursive: true, force: true })
      await d.drop()
    })

    it('the next serve resends the in-flight batch, then everything else; no row is missing', async () => {
      const db = await d.create()
      const receiver = await OtlpReceiver.start()
      const env = { CORRAL_AUDIT_OTLP_ENDPOINT: receiver.url, CORRAL_AUDIT_SINK_BATCH: '3', CORRAL_LEASE_TTL: '2' }
      receiver.mode = { kind: 'stall', ms: 15_000, times: 1 }
      const first = await startServe({ dataDir, ...(db ? { db } : {}), env })
      await until(() => receiver.requests >= 1, 'the first request at the receiver')
      const inFlight = receiver.ids()
      expect(inFlight.length).toBeGreaterThan(0)
      first.process.kill('SIGKILL')
      await new Promise((r) => first.process.once('exit', r))

      const second = await startServe({ dataDir, ...(db ? { db } : {}), env })
      try {
        const log = await logIds(second)
        // The dead replica's lease expires (CORRAL_LEASE_TTL), then the in-flight batch comes again, then the rest.
        await until(() => receiver.records.length >= log.length + inFlight.length, 'every row of the log at the receiver, the in-flight batch twice')
        const got = receiver.records.map((r) => String(r.attributes['corral.audit.event_id']))
        // Distinct ids in the log's order: nothing missing, nothing out of order.
        expect(receiver.ids().slice(0, log.length)).toEqual(log)
        // The only repeats are the batch that was in flight when serve died, once each.
        const repeats = got.filter((id, i) => got.indexOf(id) !== i)
        expect(repeats).toEqual(inFlight)
      } finally {
        await second.stop({ keepDataDir: true })
        await receiver.close()
      }
    })
  })
}
