// WebSocket message budgets against the real ledgers, on SQLite and PostgreSQL: sockets of one
// workspace racing for the last units of a ceiling never relay more than it covers, each closed
// 4008 when it cannot, and the ledger holds exactly what was relayed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testDialects } from '../helpers/dialects.js'
import { startHarness, type Harness } from './harness.js'
import { closed, opened, wsTunnel, wsUpstream, type WsUpstream } from './ws-helpers.js'

const CAPS = `
- name: realtime
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/usage"]
  budgets:
    counters:
      - name: tokens
        source: websocket.message
        direction: to_agent
        value: 'event.type == "response.completed" ? event.data.response.usage.total_tokens : 0'
        workspace: { max: 100 }
`

for (const d of testDialects()) {
  describe(`WebSocket budgets [${d.name}]`, () => {
    let h: Harness
    let up: WsUpstream

    beforeAll(async () => {
      h = await startHarness({ store: await d.open() })
      up = wsUpstream(h)
    })
    afterAll(async () => {
      up?.close()
      await h?.close()
    })

    it('three sockets racing for a ceiling of 100 relay at most two 40-token events in all; every one ends 4008, the rows debit 80 and the ledger never less', async () => {
      const ws = await h.workspace(CAPS)
      const before = h.audit.decisions().length
      const sockets = await Promise.all([0, 1, 2].map(() => wsTunnel(h, ws.token, '/usage')))
      expect(await Promise.all(sockets.map((s) => opened(s)))).toEqual([{ open: true }, { open: true }, { open: true }])
      let relayed = 0
      for (const s of sockets) s.on('message', () => relayed++)
      const ends = sockets.map((s) => closed(s))
      for (let i = 0; i < 3; i++) for (const s of sockets) s.send(`turn ${i}`)
      for (const end of await Promise.all(ends)) expect(end).toEqual({ code: 4008, reason: 'budget_exhausted' })
      expect(relayed).toBe(2)
      const rows = (await h.audit.waitForDecisions(before + 3)).slice(before)
      expect(rows).toHaveLength(3)
      expect(rows.reduce((n, r) => n + (r.debits as { tokens: number }).tokens, 0)).toBe(80)
      // The ledger never holds less than was spent; what is above 80 is a lease not yet returned.
      const key = `${ws.workspaceId}|ws|realtime|tokens`
      const row = (await h.store.db.selectFrom('budget_ledgers' as never).selectAll().where('key' as never, '=', key as never).executeTakeFirst()) as { used: number | string } | undefined
      expect(Number(row?.used)).toBeGreaterThanOrEqual(80)
      expect(Number(row?.used)).toBeLessThanOrEqual(100)
    })
  })
}
