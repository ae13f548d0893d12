// kill -9 of `serve` under load (issue 14 §2): agents send proxied requests and API clients create
// secrets and API keys; serve is killed with SIGKILL mid-load and started again on the same data
// dir and database. Every request whose answer a client received must have exactly one
// policy_decision row, and every mutation answered 2xx its audit row. Counts are printed.
import { afterAll, describe, expect, it } from 'vitest'
import { agentLoad, apiLoad, auditRows, chaosCaps, missingDecisions, missingMutations, seedWorkspace, sleep, startChaos, type Chaos } from './harness.js'
import { chaosDialects } from './dialects.js'

const LOAD_MS = 1_500

for (const d of chaosDialects('chaos/kill9.test.ts')) {
  describe(`kill -9 of serve under load [${d.name}]`, () => {
    let c: Chaos | undefined
    afterAll(async () => {
      await c?.close()
      await d.drop()
    })

    it('every answered proxied request and every 2xx mutation has its row after restart', async () => {
      const db = await d.create()
      c = await startChaos(db ? { db } : {})
      const ws = await seedWorkspace(c, chaosCaps())
      const stop = new AbortController()
      const chaos = c
      const agents = agentLoad({ proxyUrl: () => chaos.proxyUrl, token: ws.token, caPem: ws.caPem, port: c.upstream.port, prefixes: ['chaos'], concurrency: 8, stop: stop.signal })
      const api = apiLoad({ url: () => chaos.serve.url, key: c.serve.adminKey, concurrency: 3, stop: stop.signal })
      await sleep(LOAD_MS)
      await c.kill9()
      stop.abort()
      const [t, m] = await Promise.all([agents, api])
      await c.restart()

      // The rows must be there once serve is back (a replay may finish just after the ready line: bounded wait).
      let gaps = { missing: [] as string[], duplicated: [] as string[] }
      let lostMutations = { secrets: [] as string[], keys: [] as string[] }
      for (let i = 0; i < 50; i++) {
        const rows = await c.store((s) => auditRows(s, ['policy_decision', 'secret_created', 'api_key_created']))
        gaps = missingDecisions(t.answered, rows)
        lostMutations = missingMutations(m, rows)
        if (!gaps.missing.length && !lostMutations.secrets.length && !lostMutations.keys.length) break
        await sleep(100)
      }
      const summary = {
        dialect: d.name, answered: t.answered.length, allowed: t.answered.filter((a) => a.status === 200).length, unanswered: t.failed,
        decisions_missing: gaps.missing.length, decisions_duplicated: gaps.duplicated.length,
        mutations_2xx: m.secrets.length + m.keys.length, mutations_missing: lostMutations.secrets.length + lostMutations.keys.length,
      }
      console.log(`chaos kill9 ${JSON.stringify(summary)}`)
      expect(t.answered.length).toBeGreaterThan(20)
      expect(m.secrets.length + m.keys.length).toBeGreaterThan(5)
      expect(gaps.missing).toEqual([])
      expect(gaps.duplicated).toEqual([])
      expect(lostMutations).toEqual({ secrets: [], keys: [] })
    })
  })
}
