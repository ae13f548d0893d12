// kill -9 of `serve` under load (issue 14 §2): agents send proxied requests and API clients create
// secrets and API keys; serve is killed with SIGKILL mid-load and started again on the same data
// dir and database. Every request whose answer a client received must have exactly one
// policy_decision row, and every mutation answered 2xx its audit row; twice, then once more with
// SIGTERM (exit 0, same counts). Counts are printed.
import { afterAll, describe, expect, it } from 'vitest'
import { agentLoad, apiLoad, auditRows, chaosCaps, missingDecisions, missingMutations, newMutationTally, seedWorkspace, sleep, startChaos, until, type Chaos, type Tally } from './harness.js'
import { chaosDialects } from './dialects.js'

// Kill once this much was answered (however slow the machine is), or after MAX_LOAD_MS.
const MIN_ANSWERED = 60
const MIN_MUTATIONS = 12
const MAX_LOAD_MS = 10_000
const ROUNDS = 2

for (const d of chaosDialects('chaos/kill9.test.ts')) {
  describe(`kill -9 of serve under load [${d.name}]`, () => {
    let c: Chaos | undefined
    afterAll(async () => {
      await c?.close()
      await d.drop()
    })

    it('every answered proxied request and every 2xx mutation has its row after restart (kill -9 twice, then SIGTERM)', async () => {
      const db = await d.create()
      c = await startChaos(db ? { db } : {})
      const ws = await seedWorkspace(c, chaosCaps(c.upstream.port))
      const chaos = c
      // Two rounds: load, SIGKILL mid-load, start again on the same data; the second round also
      // runs on top of the first one's replay. A last round ends with SIGTERM instead: serve
      // drains what is in flight and exits 0, and the same counts must hold.
      const t: Tally = { answered: [], failed: 0, failedStarts: [] }
      const m = newMutationTally()
      let sigtermExit: number | null = -1
      let sigtermAt = Infinity
      let lastRoundAt = Infinity
      for (let round = 0; round <= ROUNDS; round++) {
        const stop = new AbortController()
        const before = { answered: t.answered.length, mutations: m.secrets.length + m.keys.length, at: performance.now() }
        const agents = agentLoad({ tally: t, proxyUrl: () => chaos.proxyUrl, token: ws.token, caPem: ws.caPem, port: chaos.upstream.port, prefixes: ['chaos'], concurrency: 8, stop: stop.signal })
        const api = apiLoad({ tally: m, url: () => chaos.serve.url, key: chaos.serve.adminKey, concurrency: 3, stop: stop.signal })
        await until(() => t.answered.length - before.answered >= MIN_ANSWERED && m.secrets.length + m.keys.length - before.mutations >= MIN_MUTATIONS, MAX_LOAD_MS)
        await sleep(200) // mid-stream: requests and mutations are in flight when the kill lands
        if (round < ROUNDS) await chaos.kill9()
        else {
          lastRoundAt = before.at
          sigtermAt = performance.now()
          sigtermExit = await chaos.serve.stop({ keepDataDir: true })
          // A failed drain names its reason in serve's own lines: keep them with the result.
          if (sigtermExit !== 0) console.log(`serve's last lines before exit ${sigtermExit}:\n${chaos.serve.output().split('\n').slice(-40).join('\n')}`)
        }
        stop.abort()
        await Promise.all([agents, api])
        await chaos.restart()
      }

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
        dialect: d.name, kills: ROUNDS, sigterm_exit: sigtermExit, // requests already sent when SIGTERM came that got no answer (drain)
        cut_by_sigterm: t.failedStarts!.filter((at) => at >= lastRoundAt && at < sigtermAt).length, answered: t.answered.length, allowed: t.answered.filter((a) => a.status === 200).length, unanswered: t.failed,
        decisions_missing: gaps.missing.length, decisions_duplicated: gaps.duplicated.length,
        mutations_2xx: m.secrets.length + m.keys.length, mutations_missing: lostMutations.secrets.length + lostMutations.keys.length,
      }
      console.log(`chaos kill9 ${JSON.stringify(summary)}`)
      expect(sigtermExit).toBe(0)
      expect(t.answered.length).toBeGreaterThanOrEqual(ROUNDS * MIN_ANSWERED)
      expect(m.secrets.length + m.keys.length).toBeGreaterThanOrEqual(ROUNDS * MIN_MUTATIONS)
      expect(gaps.missing).toEqual([])
      expect(gaps.duplicated).toEqual([])
      expect(lostMutations).toEqual({ secrets: [], keys: [] })
    })
  })
}
