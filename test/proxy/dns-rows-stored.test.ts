// The DNS phase's rows as the audit log keeps them: stored by both dialects and found by the
// filter `policy_type=dns` (what `corral audit query --filter policy_type=dns` and the console send).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { queryAudit } from '../../src/audit/index.js'
import { testDialects } from '../helpers/dialects.js'
import { startHarness, type Harness } from './harness.js'
import { dnsStream } from './transparent-harness.js'

const CAPS = `
- name: docs
  type: http
  allow:
    - domains: ["docs.allowed.dev", "*.cdn.allowed.dev"]
      methods: [GET]
`

for (const d of testDialects()) {
  describe(`dns rows in the audit log [${d.name}]`, () => {
    let h: Harness

    beforeAll(async () => {
      h = await startHarness({ store: await d.open() })
    })
    afterAll(async () => {
      await h?.close()
    })

    it('are stored and listed by policy_type=dns, apart from the http rows', async () => {
      const ws = await h.workspace(CAPS, 'idle', { raw: true })
      const dns = await dnsStream(Number(new URL(h.proxyUrl).port), ws.token)
      for (const name of ['docs.allowed.dev', 'img.cdn.allowed.dev', 'not.allowed.dev']) expect((await dns.query(name)).rcode).toBe('NOERROR')
      dns.close()
      await h.fetch('https://not-in-policy.dev/', { token: ws.token })
      const mine = h.audit.rows.filter((r) => r.workspace_id === ws.workspaceId)
      await h.store.audit.insertBatch(mine)
      const page = await queryAudit(h.store, h.orgId, { filter: 'policy_type=dns', order: 'asc' })
      expect(page.events.map((e) => [e.destination, e.phase, e.decision, e.capability_name])).toEqual([
        ['docs.allowed.dev', 'dns', 'allow', 'docs'],
        ['img.cdn.allowed.dev', 'dns', 'allow', 'docs'],
      ])
      const http = await queryAudit(h.store, h.orgId, { filter: 'policy_type=http' })
      expect(http.events.length).toBeGreaterThanOrEqual(1)
      expect(http.events.every((e) => e.policy_type === 'http')).toBe(true)
    })
  })
}
