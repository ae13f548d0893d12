// A full disk under the proxy: the data dir (audit journal, and the SQLite database) is a small
// tmpfs that a filler file fills to ENOSPC while agents keep sending requests, then frees again.
// What the client is told must match what the upstream saw: the upstream receives no request
// whose client got a failure (a deny, a cut response, no answer), and every request it received
// has its policy_decision row once the disk has room again (nothing was forwarded while its row
// could not be made durable). Shapes: SQLite on the full disk with each journal durability, and
// PostgreSQL elsewhere with only the journal on the full disk. Counts are printed.
import { execFileSync } from 'node:child_process'
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ProxyAgent, fetch as undiciFetch } from 'undici'
import { afterAll, describe, expect, it } from 'vitest'
import { auditRows, chaosCaps, seedWorkspace, sleep, startChaos, type Chaos } from './harness.js'
import { chaosDialects, type ChaosDb } from './dialects.js'

interface Outcome { path: string; stage: 'warm' | 'full' | 'recovered'; status: number | 'no_answer'; reason?: string }

/** Fills the filesystem of `dir` with one file until the kernel answers ENOSPC. */
function fill(dir: string): string {
  const path = join(dir, 'filler')
  const fd = openSync(path, 'w')
  try {
    for (const size of [1 << 20, 64 << 10, 4 << 10]) {
      const buf = Buffer.alloc(size, 1)
      for (;;) {
        try {
          if (writeSync(fd, buf) < size) break
        } catch (err) {
          if ((err as { code?: string }).code === 'ENOSPC') break
          throw err
        }
      }
    }
  } finally {
    closeSync(fd)
  }
  return path
}

const shapes: Array<{ db: ChaosDb; durability: 'process' | 'host' }> = chaosDialects('chaos/disk-full.test.ts').flatMap((db) =>
  db.name === 'sqlite' ? [{ db, durability: 'process' as const }, { db, durability: 'host' as const }] : [{ db, durability: 'process' as const }])

for (const { db: d, durability } of shapes) {
  describe(`the disk under the audit journal fills [${d.name}, ${durability}]`, () => {
    let c: Chaos | undefined
    let mnt: string | undefined
    afterAll(async () => {
      await c?.close()
      if (mnt) {
        execFileSync('umount', ['-l', mnt])
        rmSync(mnt, { recursive: true, force: true })
      }
      await d.drop()
    })

    it('no request reaches the upstream unless its client is answered with it and its row is durable', async () => {
      mnt = mkdtempSync(join(tmpdir(), 'corral-diskfull-'))
      // A real filesystem limit: the kernel answers ENOSPC (root only; the suite runs as root).
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=48m,mode=0700', 'tmpfs', mnt])
      const dataDir = join(mnt, 'data')
      mkdirSync(dataDir, { mode: 0o700 })
      const db = await d.create()
      // No workspace runs here: serve's start probe for kernel disk quotas (a loop-mounted image in
      // the data dir) is beside the point on this small tmpfs, and is not what this test is about.
      c = await startChaos({ dataDir, env: { CORRAL_AUDIT_DURABILITY: durability, CORRAL_ALLOW_UNENFORCED_LIMITS: '1' }, ...(db ? { db } : {}) })
      const chaos = c
      const ws = await seedWorkspace(chaos, chaosCaps(chaos.upstream.port))
      const outcomes: Outcome[] = []
      let n = 0

      const sender = async (stage: Outcome['stage'], until: () => boolean): Promise<void> => {
        const agent = new ProxyAgent({ uri: chaos.proxyUrl, token: `Bearer ${ws.token}`, requestTls: { ca: ws.caPem }, connections: 1 })
        try {
          while (!until()) {
            const path = `/chaos/${stage}-${n++}`
            try {
              const res = await undiciFetch(`https://127.0.0.1:${chaos.upstream.port}${path}`, {
                method: 'POST', dispatcher: agent, body: JSON.stringify({ n }), headers: { 'content-type': 'application/json' },
                signal: AbortSignal.timeout(20_000),
              })
              await res.arrayBuffer()
              const reason = res.headers.get('x-corral-deny-reason')
              outcomes.push({ path, stage, status: res.status, ...(reason ? { reason } : {}) })
              if (res.status !== 200) await sleep(50)
            } catch {
              outcomes.push({ path, stage, status: 'no_answer' })
              await sleep(50)
            }
          }
        } finally {
          await agent.destroy().catch(() => {})
        }
      }
      const load = async (stage: Outcome['stage'], ms: number, concurrency = 4): Promise<void> => {
        const end = Date.now() + ms
        await Promise.all(Array.from({ length: concurrency }, () => sender(stage, () => Date.now() >= end)))
      }

      await load('warm', 1_000, 2)
      expect(outcomes.filter((o) => o.status === 200).length).toBeGreaterThan(0)

      const filler = fill(mnt)
      await load('full', 4_000)
      rmSync(filler)
      // Room again: the journal writes its standby anew and the gate reopens by itself.
      const recoverBy = Date.now() + 20_000
      await sender('recovered', () => outcomes.some((o) => o.stage === 'recovered' && o.status === 200) || Date.now() > recoverBy)

      const by = (stage: Outcome['stage']) => outcomes.filter((o) => o.stage === stage)
      const count = (os: Outcome[]) => Object.entries(os.reduce<Record<string, number>>((acc, o) => ((acc[`${o.status}${o.reason ? ` ${o.reason}` : ''}`] = (acc[`${o.status}${o.reason ? ` ${o.reason}` : ''}`] ?? 0) + 1), acc), {}))
      console.log(`disk-full [${d.name}, ${durability}]: warm ${JSON.stringify(count(by('warm')))}, full ${JSON.stringify(count(by('full')))}, recovered ${JSON.stringify(count(by('recovered')))}; upstream received ${chaos.upstream.paths.length}`)

      // What the client was told matches what the upstream saw.
      const told = new Map(outcomes.map((o) => [o.path, o]))
      const seen = new Set(chaos.upstream.paths)
      const forwardedButFailed = [...seen].filter((p) => told.get(p)?.status !== 200)
      expect(forwardedButFailed, 'paths the upstream received whose client got a failure').toEqual([])
      const answeredButUnseen = outcomes.filter((o) => o.status === 200 && !seen.has(o.path)).map((o) => o.path)
      expect(answeredButUnseen).toEqual([])
      expect(by('recovered').some((o) => o.status === 200), 'the proxy forwards again once the disk has room').toBe(true)

      // Every forwarded request's row is stored once the disk has room (journal replayed into the database).
      let missing: string[] = []
      for (let i = 0; i < 60; i++) {
        const rows = await chaos.store((s) => auditRows(s, ['policy_decision']))
        const allowed = new Set(rows.filter((r) => r.decision === 'allow').map((r) => r.path))
        missing = [...seen].filter((p) => !allowed.has(p))
        if (missing.length === 0) break
        await sleep(500)
      }
      expect(missing, 'forwarded requests without an allow row').toEqual([])
    })
  })
}
