// The journal's group commit (src/audit/group-commit.ts): one write per group, not per event.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openAuditWriter, queryAudit } from '../../src/audit/index.js'
import { GroupCommit, type GroupItem } from '../../src/audit/group-commit.js'
import { MAX_GROUP_CHARS, type Journal, type Segment } from '../../src/audit/journal.js'
import type { Store } from '../../src/store/index.js'
import { testDialects } from '../helpers/dialects.js'
import { decision, orgId } from './fixtures.js'

const turn = () => new Promise<void>((r) => setImmediate(r))

/** A journal that records each write and holds it until `release()`. */
function fakeJournal() {
  const writes: Array<{ text: string; lines: number }> = []
  let release: () => void = () => {}
  const seg = { path: 'x', bytes: 0, outstanding: 0, sealed: false } as Segment
  const journal = {
    write(text: string, lines: number): Promise<Segment> {
      writes.push({ text, lines })
      return new Promise((r) => (release = () => r(seg)))
    },
  } as unknown as Journal
  return { journal, writes, release: () => release() }
}

function groups(journal: Journal) {
  const written: GroupItem[][] = []
  const gc = new GroupCommit<GroupItem>(journal, { written: (g) => written.push(g), failed: () => {} })
  return { gc, written }
}

const item = (line: string): GroupItem => ({ line, size: line.length })

describe('journal group commit', () => {
  it('events added in one turn of the event loop go to disk in one write, one line each', async () => {
    const f = fakeJournal()
    const { gc, written } = groups(f.journal)
    for (let i = 0; i < 5; i++) gc.add(item(`{"n":${i}}`))
    expect(f.writes).toHaveLength(0)
    await turn()
    expect(f.writes).toEqual([{ text: '{"n":0}\n{"n":1}\n{"n":2}\n{"n":3}\n{"n":4}\n', lines: 5 }])
    f.release()
    await turn()
    expect(written.map((g) => g.length)).toEqual([5])
  })

  it('events added while a write is in flight form the next write, started when it completes', async () => {
    const f = fakeJournal()
    const { gc, written } = groups(f.journal)
    gc.add(item('a'))
    await turn()
    gc.add(item('b'))
    gc.add(item('c'))
    await turn()
    expect(f.writes.map((w) => w.lines)).toEqual([1])
    f.release()
    await turn()
    expect(f.writes.map((w) => w.text)).toEqual(['a\n', 'b\nc\n'])
    f.release()
    await turn()
    expect(written.map((g) => g.map((i) => i.line))).toEqual([['a'], ['b', 'c']])
  })

  it('a group is bounded in size: a large backlog is written in several writes, every event once', async () => {
    const f = fakeJournal()
    const { gc, written } = groups(f.journal)
    const big = 'x'.repeat(MAX_GROUP_CHARS / 4)
    for (let i = 0; i < 10; i++) gc.add(item(`${i}${big}`))
    for (let i = 0; i < 10 && written.length < 10; i++) {
      await turn()
      f.release()
      await turn()
    }
    expect(f.writes.length).toBeGreaterThan(1)
    for (const w of f.writes) expect(w.lines === 1 || w.text.length <= MAX_GROUP_CHARS + w.lines).toBe(true)
    expect(written.flat().map((i) => i.line![0])).toEqual(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'])
  })
})

for (const d of testDialects()) {
  describe(`audit writer with a journal: the database linger [${d.name}]`, () => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-linger-'))
    let store: Store
    beforeAll(async () => {
      store = await d.open()
    })
    afterAll(async () => {
      await store.close()
      rmSync(dir, { recursive: true, force: true })
    })
    const ids = async (org: string) => (await queryAudit(store, org, { limit: 100 })).events.map((e) => e.id).sort()

    it('flush() does not wait out dbLingerMs: the rows are in the database when it resolves', async () => {
      const writer = await openAuditWriter(store, { journalDir: join(dir, 'flush'), dbLingerMs: 600_000 })
      const org = orgId()
      const events = await Promise.all([writer.emit(decision(org)), writer.emit(decision(org))])
      await writer.flush()
      expect(await ids(org)).toEqual(events.map((e) => e.id).sort())
      await writer.close()
    })

    // The linger is bounded in rows as well as in time: once batchSize rows are queued, they are
    // committed (and become queryable) without anyone calling flush(), however long dbLingerMs is.
    // Each emit is awaited, so each row reaches the stage in its own journal group: the first one
    // starts the linger, the later ones fill the batch.
    for (const [batchSize, emitted] of [[2, 2], [3, 3], [3, 7]] as const) {
      it(`rows arriving one by one are committed once they fill a batch of ${batchSize}, without waiting out dbLingerMs (${emitted} emitted)`, async () => {
        const writer = await openAuditWriter(store, { journalDir: join(dir, `full-${batchSize}-${emitted}`), dbLingerMs: 600_000, batchSize })
        const org = orgId()
        const emittedIds: string[] = []
        for (let i = 0; i < emitted; i++) emittedIds.push((await writer.emit(decision(org))).id)
        const full = emitted - (emitted % batchSize)
        while ((await ids(org)).length < full) await new Promise((r) => setTimeout(r, 20))
        expect(await ids(org)).toEqual(emittedIds.slice(0, full).sort())
        await writer.close()
        expect(await ids(org)).toEqual(emittedIds.sort())
      })
    }
  })
}
