import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { hostname, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openAuditWriter, queryAudit } from '../../src/audit/index.js'
import type { Store } from '../../src/store/index.js'
import { storeTarget, testDialects } from '../helpers/dialects.js'
import { procStatField, zombie } from '../helpers/zombie.js'
import { decision, mutation, orgId } from './fixtures.js'
import { failing, quietLogger, withInsert } from './writer-helpers.js'

const ROOT = resolve(import.meta.dirname, '../..')
const dirs: string[] = []
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'corral-journal-'))
  dirs.push(d)
  return d
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

/** Every *.jsonl line under the journal root. */
function journalLines(root: string): string[] {
  const out: string[] = []
  for (const w of readdirSync(root)) for (const f of readdirSync(join(root, w)).filter((n) => n.endsWith('.jsonl'))) {
    out.push(...readFileSync(join(root, w, f), 'utf8').split('\n').filter(Boolean))
  }
  return out
}

/** A journal left by a writer whose database never answered, its LOCK naming `owner` as if it were still open. */
async function leftJournal(store: Store, org: string, owner: object): Promise<{ root: string; id: string }> {
  const root = tempDir()
  const first = await openAuditWriter(withInsert(store, () => new Promise(() => {})), { journalDir: root, drainTimeoutMs: 50, logger: quietLogger() })
  const { id } = await first.emit(decision(org))
  await first.close()
  const [dir] = readdirSync(root)
  writeFileSync(join(root, dir, 'LOCK'), JSON.stringify({ host: hostname(), ...owner }))
  return { root, id }
}

for (const d of testDialects()) {
  describe(`audit journal [${d.name}]`, () => {
    let store: Store
    beforeAll(async () => {
      store = await d.open()
    })
    afterAll(async () => {
      await store.close()
    })
    const ids = async (org: string) => (await queryAudit(store, org, { limit: 10_000 })).events.map((e) => e.id).sort()

    it('emit resolves once the event is on disk, before the database has it; the next start replays it', async () => {
      const org = orgId()
      const root = tempDir()
      const hung = withInsert(store, () => new Promise(() => {}))
      const logged: string[] = []
      const first = await openAuditWriter(hung, { journalDir: root, drainTimeoutMs: 100, logger: quietLogger(logged) })
      const events = await Promise.all([first.emit(mutation(org)), first.emit(decision(org))])
      expect(await ids(org)).toEqual([])
      expect(journalLines(root).map((l) => JSON.parse(l).id).sort()).toEqual(events.map((e) => e.id).sort())
      // The database never answered: close keeps the journal (no error: nothing is lost) and says so.
      await first.close()
      expect(logged.at(-1)).toMatch(/2 event\(s\) not yet in the database .* kept in the journal/)
      const second = await openAuditWriter(store, { journalDir: root })
      expect(await ids(org)).toEqual(events.map((e) => e.id).sort())
      expect(second.stats().replayed).toBe(2)
      expect(await queryAudit(store, org, { limit: 10 }).then((p) => p.events.find((e) => e.id === events[1].id))).toEqual(events[1])
      await second.close()
      expect(readdirSync(root)).toEqual([])
    })

    it('replay quarantines a corrupt line, keeps quarantine records and skips a torn tail', async () => {
      const org = orgId()
      const root = tempDir()
      const hung = withInsert(store, () => new Promise(() => {}))
      const first = await openAuditWriter(hung, { journalDir: root, drainTimeoutMs: 50, logger: quietLogger() })
      const good = await first.emit(mutation(org))
      const bad = await first.emit({ ...mutation(org), actor: 'nobody' as never })
      await first.close()
      // Damage the kept segment: a line that is not JSON in the middle, a torn write at the end.
      const [dir] = readdirSync(root)
      const [seg] = readdirSync(join(root, dir)).filter((f) => f.endsWith('.jsonl'))
      const path = join(root, dir, seg)
      const lines = readFileSync(path, 'utf8').split('\n').filter(Boolean)
      writeFileSync(path, [lines[0], '{"not json', lines[1]].join('\n') + '\n{"id":"torn')
      const logged: string[] = []
      const second = await openAuditWriter(store, { journalDir: root, logger: quietLogger(logged) })
      expect(await ids(org)).toEqual([good.id])
      const q = await store.audit.listQuarantine({ limit: 1000 })
      expect(q.find((r) => r.id === bad.id)?.reason).toMatch(/^invalid_event: actor/)
      expect(q.some((r) => r.reason.startsWith('journal_corrupt') && r.event.includes('not json'))).toBe(true)
      expect(logged.some((m) => m.includes('unfinished last write'))).toBe(true)
      await second.close()
      expect(readdirSync(root)).toEqual([])
    })

    it('segments whose events are all in the database are deleted', async () => {
      const org = orgId()
      const root = tempDir()
      const writer = await openAuditWriter(store, { journalDir: root, journalSegmentBytes: 2_000 })
      for (let i = 0; i < 40; i++) await Promise.all([writer.emit(mutation(org)), writer.emit(mutation(org))])
      await writer.flush()
      expect(writer.stats().journal!.segments).toBeLessThanOrEqual(1)
      expect((await ids(org)).length).toBe(80)
      await writer.close()
      expect(readdirSync(root)).toEqual([])
    })

    it('an acknowledged event the database refuses is quarantined whole (every field, from its journal line), the rest of its batch written', async () => {
      // Past the journal the writer keeps an event's line, not the event object.
      const org = orgId()
      const poison = `${org}_poison`
      const refusing = failing(store, (rows) => rows.some((r) => String(r[1]) === poison) ? Object.assign(new Error('invalid input syntax for type json'), { code: '22P02' }) : undefined)
      const writer = await openAuditWriter(refusing, { journalDir: tempDir(), logger: quietLogger() })
      const events = await Promise.all(Array.from({ length: 8 }, (_, i) => writer.emit(i === 5 ? decision(poison, { detail: { why: 'refused', n: [1, 2] } }) : mutation(org))))
      await writer.flush()
      expect((await ids(org)).length).toBe(7)
      const q = (await store.audit.listQuarantine({ limit: 1000 })).find((r) => r.id === events[5].id)
      expect(q?.reason).toMatch(/^database_refused: 22P02/)
      expect(q?.org_id).toBe(poison)
      expect(JSON.parse(q!.event)).toEqual(events[5])
      await writer.close()
    })

    it('a journal that cannot be written degrades to acknowledging after the database commit, and says so once', async () => {
      const org = orgId()
      const root = tempDir()
      const logged: string[] = []
      const writer = await openAuditWriter(store, { journalDir: root, journalSegmentBytes: 100, logger: quietLogger(logged) })
      await writer.emit(mutation(org))
      // The writer's directory vanishes (disk trouble): no new segment can be opened.
      for (const d of readdirSync(root)) rmSync(join(root, d), { recursive: true, force: true })
      const events = await Promise.all([writer.emit(mutation(org)), writer.emit(mutation(org)), writer.emit(mutation(org))])
      // Each resolved emit is in the database already.
      const stored = await ids(org)
      for (const e of events) expect(stored).toContain(e.id)
      expect(stored).toHaveLength(4)
      expect(logged.filter((m) => m.includes('journal write failed'))).toHaveLength(1)
      await writer.close()
    })

    it('a writer that exited but is not yet reaped (a zombie) is gone: its journal is replayed', async () => {
      const org = orgId()
      const z = await zombie()
      try {
        const { root, id } = await leftJournal(store, org, { pid: z.pid })
        const second = await openAuditWriter(store, { journalDir: root })
        expect(await ids(org)).toEqual([id])
        await second.close()
      } finally {
        z.stop()
      }
    })

    it("a writer's pid now held by another process is gone (its start time differs): its journal is replayed; a live writer's is not", async () => {
      const org = orgId()
      const z = await zombie()
      try {
        // The LOCK names a live process (the zombie's parent) but another start time: the pid was reused.
        const start = Number(procStatField(z.parentPid, 22))
        const reused = await leftJournal(store, org, { pid: z.parentPid, start: start - 1 })
        const second = await openAuditWriter(store, { journalDir: reused.root })
        expect(await ids(org)).toEqual([reused.id])
        await second.close()
        const live = await leftJournal(store, org, { pid: z.parentPid, start })
        const third = await openAuditWriter(store, { journalDir: live.root })
        expect(await ids(org)).toEqual([reused.id])
        await third.close()
      } finally {
        z.stop()
      }
    })

    for (const [mode, durability] of [['hung', 'process'], ['live', 'process'], ['hung', 'host'], ['live', 'host']] as const) {
      it(`kill -9 mid-emit loses no acknowledged event (database ${mode === 'hung' ? 'not answering' : 'writing'}, ${durability} durability)`, async () => {
        const target = storeTarget(store)!
        const org = orgId()
        const root = tempDir()
        const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test/audit/journal-child.ts'), target.url, target.schema ?? '-', root, org, mode, durability], {
          cwd: ROOT,
          stdio: ['ignore', 'pipe', 'inherit'],
        })
        const acked: string[] = []
        let buf = ''
        const exited = new Promise<void>((r) => child.on('exit', () => r()))
        await new Promise<void>((done, fail) => {
          child.on('exit', () => fail(new Error('child exited early')))
          child.stdout!.on('data', (chunk: Buffer) => {
            buf += chunk.toString()
            const lines = buf.split('\n')
            buf = lines.pop()!
            for (const l of lines) if (l !== 'ready') acked.push(l)
            if (acked.length >= 300) done()
          })
        })
        child.kill('SIGKILL')
        await exited
        // Ids printed after the last full line were acknowledged too, but we only count full lines.
        const writer = await openAuditWriter(store, { journalDir: root })
        // Looked up by id: a fast writer journals more than one page (10,000) of events before the kill.
        const stored = new Set<string>()
        for (let i = 0; i < acked.length; i += 1000) for (const e of await store.audit.listByIds(acked.slice(i, i + 1000))) stored.add(e.id)
        const seen = JSON.stringify({ pid: child.pid, acked: acked.length, stored: stored.size, stats: writer.stats() })
        expect(acked.filter((id) => !stored.has(id)), seen).toEqual([])
        await writer.close()
      }, 60_000)
    }
  })
}
