// Budget ledgers on both dialects: atomic leases under contention, and two proxy processes on
// one database sharing one ceiling.
import { ProxyAgent, fetch as undiciFetch } from 'undici'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { ProxyService } from '../../src/proxy/service.js'
import { budgetLedgers } from '../../src/store/budget-ledgers.js'
import { openSibling, testDialects } from '../helpers/dialects.js'
import { startHarness, type Harness } from './harness.js'

const CAPS = `
- name: calls
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET]
  budgets:
    counters:
      - name: calls
        source: request.count
        workspace: { max: 7, ttl: 1h }
`

for (const d of testDialects()) {
  describe(`budget ledgers [${d.name}]`, () => {
    const harnesses: Harness[] = []
    afterAll(async () => {
      for (const h of harnesses) await h.close()
    })

    it('parallel acquires never grant more than the ceiling, and returns only apply in their window', async () => {
      const store = await d.open()
      const ledgers = budgetLedgers(store)
      const k = { key: `k-${d.name}`, orgId: 'org_x', workspaceId: 'ws_x', ttlMs: 60_000 }
      const grants = await Promise.all(Array.from({ length: 40 }, () => ledgers.acquire(k, 20, 1)))
      expect(grants.reduce((n, g) => n + g.granted, 0)).toBe(20)
      const window = grants[0]!.snapshot.windowStart
      await ledgers.adjust([{ k, delta: -3, leasedInWindow: window }])
      expect((await ledgers.read(k.key))!.used).toBe(17)
      await ledgers.adjust([{ k, delta: -3, leasedInWindow: window - 1 }])
      expect((await ledgers.read(k.key))!.used).toBe(17)
      // A window older than the ttl resets.
      const later = await ledgers.acquire(k, 20, 5, Date.now() + 61_000)
      expect(later).toMatchObject({ granted: 5, snapshot: { used: 5 } })
    })

    it('two proxy processes on one database share one ceiling', async () => {
      const store = await d.open()
      const h = await startHarness({ store })
      harnesses.push(h)
      const sibling = await openSibling(store)
      const second = new ProxyService({ store: sibling, audit: h.audit, dataDir: join(h.dir, 'data'), port: 0, upstreamCaPem: [h.up.caPem] })
      const port2 = await second.start()
      try {
        const { workspaceId } = await h.workspace(CAPS)
        const token = await h.token(workspaceId)
        const via = async (proxyUrl: string): Promise<number> => {
          const agent = new ProxyAgent({ uri: proxyUrl, token: `Bearer ${token}`, requestTls: { ca: h.proxy.ca.certPem } })
          try {
            const res = await undiciFetch(`https://127.0.0.1:${h.up.httpsPort}/x`, { dispatcher: agent })
            await res.text()
            return res.status
          } finally {
            await agent.close()
          }
        }
        const statuses = await Promise.all(Array.from({ length: 16 }, (_, i) => via(i % 2 ? h.proxyUrl : `http://127.0.0.1:${port2}`)))
        expect(statuses.filter((s) => s === 200)).toHaveLength(7)
        expect(statuses.filter((s) => s === 429)).toHaveLength(9)
      } finally {
        await second.stop()
      }
    })
  })
}
