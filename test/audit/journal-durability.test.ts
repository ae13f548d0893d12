// The journal's two durabilities (src/audit/journal.ts, docs/reliability.md "Journal durability"):
// `process` writes each group into the kernel before acknowledging it and flushes to disk in the
// background; `host` acknowledges after the disk has it. Both survive kill -9 (journal.test.ts).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { journalSettingsFromEnv } from '../../src/audit/index.js'
import { Journal } from '../../src/audit/journal.js'

const dirs: string[] = []
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'corral-journal-d-'))
  dirs.push(d)
  return d
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})
afterEach(() => {
  vi.restoreAllMocks()
})

/** The FileHandle prototype, to count fdatasync calls. */
async function fileHandleProto(): Promise<{ datasync(): Promise<void> }> {
  const fh = await open(tempDir() + '/probe', 'w')
  const proto = Object.getPrototypeOf(fh) as { datasync(): Promise<void> }
  await fh.close()
  return proto
}

const segmentText = (j: Journal): string => {
  const f = readdirSync(j.dir).filter((n) => n.endsWith('.jsonl'))
  return f.map((n) => readFileSync(join(j.dir, n), 'utf8')).join('')
}

describe('audit journal durability', () => {
  it('process: the group is in the file (any reader sees it) when its write resolves, and the write happened in the calling turn', async () => {
    const { journal } = await Journal.open(tempDir(), { durability: 'process', syncIntervalMs: 10_000 })
    expect(journal.durability).toBe('process')
    await journal.write('{"a":1}\n', 1) // the first write opens the segment
    const p = journal.write('{"b":2}\n', 1)
    // No await yet: the bytes were handed to the kernel synchronously.
    expect(segmentText(journal)).toBe('{"a":1}\n{"b":2}\n')
    await p
    await journal.close()
  })

  it('process: written data is flushed to disk in the background within the interval, and nothing is flushed when nothing was written', async () => {
    const proto = await fileHandleProto()
    const sync = vi.spyOn(proto, 'datasync')
    const { journal } = await Journal.open(tempDir(), { durability: 'process', syncIntervalMs: 20 })
    await journal.write('{"a":1}\n', 1)
    expect(sync).not.toHaveBeenCalled()
    for (let i = 0; i < 200 && sync.mock.calls.length === 0; i++) await new Promise((r) => setTimeout(r, 5))
    expect(sync).toHaveBeenCalledTimes(1)
    await new Promise((r) => setTimeout(r, 100)) // five more intervals, no new writes
    expect(sync).toHaveBeenCalledTimes(1)
    await journal.close()
  })

  it('process: close() flushes what the background timer has not yet', async () => {
    const proto = await fileHandleProto()
    const sync = vi.spyOn(proto, 'datasync')
    const { journal } = await Journal.open(tempDir(), { durability: 'process', syncIntervalMs: 10_000 })
    await journal.write('{"a":1}\n', 1)
    expect(sync).not.toHaveBeenCalled()
    await journal.close()
    expect(sync).toHaveBeenCalled()
  })

  it('host: the write resolves after the disk has it (no background flush needed) and its bytes are in the file', async () => {
    const proto = await fileHandleProto()
    const sync = vi.spyOn(proto, 'datasync')
    const { journal } = await Journal.open(tempDir(), { durability: 'host', syncIntervalMs: 5 })
    expect(journal.durability).toBe('host')
    await journal.write('{"a":1}\n', 1)
    await new Promise((r) => setTimeout(r, 50))
    expect(segmentText(journal)).toBe('{"a":1}\n')
    // With O_DSYNC (Linux) each write is synchronous to disk and no timer flushes anything.
    expect(sync).not.toHaveBeenCalled()
    await journal.close()
  })

  it('settings: defaults, both values, and a bad value named in the error', () => {
    expect(journalSettingsFromEnv({})).toEqual({ journalDurability: 'process', journalSyncIntervalMs: 100 })
    expect(journalSettingsFromEnv({ CORRAL_AUDIT_DURABILITY: 'host', CORRAL_AUDIT_SYNC_INTERVAL_MS: '250' })).toEqual({ journalDurability: 'host', journalSyncIntervalMs: 250 })
    expect(() => journalSettingsFromEnv({ CORRAL_AUDIT_DURABILITY: 'disk' })).toThrow(/CORRAL_AUDIT_DURABILITY must be "process" or "host", got "disk"/)
    for (const bad of ['0', '-5', '1.5', 'soon', '10001']) {
      expect(() => journalSettingsFromEnv({ CORRAL_AUDIT_SYNC_INTERVAL_MS: bad })).toThrow(/CORRAL_AUDIT_SYNC_INTERVAL_MS must be an integer from 1 to 10000/)
    }
  })
})
