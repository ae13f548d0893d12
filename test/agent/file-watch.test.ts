import { existsSync } from 'node:fs'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { capChanges, diffManifests, type FileChange, MAX_CHANGE_EVENTS, scanTree, walkOrder } from '../../src/agent/file-watch.js'
import { Toolbox } from '../../src/agent/tools.js'

// Real files and a real /bin/sh: the changes a shell command makes are found by scanning the tree.
let base: string
beforeAll(async () => {
  base = await mkdtemp(join(tmpdir(), 'corral-file-watch-'))
})
afterAll(async () => {
  await rm(base, { recursive: true, force: true })
})

async function fresh(name: string): Promise<string> {
  const dir = join(base, name)
  await mkdir(dir, { recursive: true })
  return dir
}

const brief = (changes: FileChange[] | undefined): string[] => (changes ?? []).map((c) => `${c.action} ${c.path}${c.size === undefined ? '' : ` ${c.size}`}`)

describe('shell commands report their file changes', () => {
  let root: string
  let tools: Toolbox
  beforeAll(async () => {
    root = await fresh('shell')
    tools = new Toolbox(root)
  })

  it('created, modified and deleted files, including a move and a nested tree', async () => {
    expect(brief((await tools.run('run_command', { command: 'echo x > a.txt && mkdir -p d/e && printf hello > d/e/f.txt' })).fileChanges))
      .toEqual(['created a.txt 2', 'created d/e/f.txt 5'])
    expect(brief((await tools.run('run_command', { command: 'echo more >> a.txt && mv d/e/f.txt d/g.txt' })).fileChanges))
      .toEqual(['modified a.txt 7', 'deleted d/e/f.txt', 'created d/g.txt 5'])
    expect(brief((await tools.run('run_command', { command: 'chmod +x a.txt' })).fileChanges)).toEqual(['modified a.txt 7'])
    expect(brief((await tools.run('run_command', { command: 'rm -r d' })).fileChanges)).toEqual(['deleted d/g.txt'])
    // A failing command's changes are reported too; a command that changes nothing reports nothing.
    expect(brief((await tools.run('run_command', { command: 'ln -s a.txt link; exit 1' })).fileChanges)).toEqual(['created link 5'])
    expect((await tools.run('run_command', { command: 'ls >/dev/null' })).fileChanges).toBeUndefined()
  })

  it('a file written by write_file is reported by that tool only, not again by the next command', async () => {
    const write = await tools.run('write_file', { path: 'notes/n.md', content: 'abc' })
    expect(brief(write.fileChanges)).toEqual(['created notes/n.md 3'])
    expect(brief((await tools.run('run_command', { command: 'echo y > b.txt' })).fileChanges)).toEqual(['created b.txt 2'])
  })

  it('a background job\'s change is reported with the next command', async () => {
    // Written atomically (rename) once the command has returned, so it is seen whole or not at all.
    const started = await tools.run('run_command', { command: '(sleep 0.3; echo late > .late.tmp && mv .late.tmp late.txt) >/dev/null 2>&1 &' })
    expect(started.fileChanges).toBeUndefined()
    await expect.poll(() => existsSync(join(root, 'late.txt')), { timeout: 10_000 }).toBe(true)
    expect(brief((await tools.run('run_command', { command: 'true' })).fileChanges)).toEqual(['created late.txt 5'])
  })

  it('skips what it cannot read instead of failing the command', async () => {
    const out = await tools.run('run_command', { command: 'mkdir -p locked/inner && echo s > locked/inner/s.txt && chmod 000 locked/inner && echo done' })
    expect(out).toMatchObject({ isError: false, output: 'exit code 0\ndone\n' })
    // As root (CI) the directory is still readable; as any other user its content is skipped.
    expect(brief(out.fileChanges)).toEqual(process.getuid?.() === 0 ? ['created locked/inner/s.txt 2'] : [])
    await tools.run('run_command', { command: 'chmod 755 locked/inner && rm -r locked' })
  })

  it('leaves out the agent\'s own state directory (.corral)', async () => {
    expect((await tools.run('run_command', { command: 'mkdir -p .corral && echo {} > .corral/session.json' })).fileChanges).toBeUndefined()
  })

  it('a new task starts from a fresh scan: changes made between tasks are not attributed to it', async () => {
    await writeFile(join(root, 'upload.bin'), 'between tasks')
    tools.beginTask()
    expect(brief((await tools.run('run_command', { command: 'rm b.txt' })).fileChanges)).toEqual(['deleted b.txt'])
  })

  it(`caps one command at ${MAX_CHANGE_EVENTS} events, the last saying how many more there were`, async () => {
    const out = await tools.run('run_command', { command: 'mkdir many && cd many && for i in $(seq 1 130); do : > f$i; done' })
    expect(out.fileChanges).toHaveLength(MAX_CHANGE_EVENTS)
    expect(out.fileChanges!.slice(0, -1).every((c) => c.truncated === undefined)).toBe(true)
    expect(out.fileChanges!.at(-1)).toMatchObject({ action: 'created', truncated: true, omitted: 30 })
  })
})

describe('bounded scans', () => {
  it('stop at the entry limit and compare only up to the earlier last path, flagged scan_truncated', async () => {
    const root = await fresh('bounded')
    for (const name of ['a', 'b', 'c', 'd', 'e']) await writeFile(join(root, name), name)
    const before = await scanTree(root, { maxEntries: 3 })
    expect(before).toMatchObject({ truncated: true, last: 'c' })
    expect([...before.entries.keys()]).toEqual(['a', 'b', 'c'])
    // `0` sorts first: it pushes `c` out of the next scan, which must not read as a deletion.
    await writeFile(join(root, '0'), 'new')
    await writeFile(join(root, 'a'), 'changed')
    await writeFile(join(root, 'e'), 'past the limit')
    const after = await scanTree(root, { maxEntries: 3 })
    expect(diffManifests(before, after)).toEqual([
      { path: '0', action: 'created', size: 3, scan_truncated: true },
      { path: 'a', action: 'modified', size: 7, scan_truncated: true },
    ])
  })

  it('a Toolbox over a tree larger than its limit says so once per task, and still reports what it compared', async () => {
    const root = await fresh('big')
    for (let i = 0; i < 20; i++) await writeFile(join(root, `z${String(i).padStart(2, '0')}`), '')
    const tools = new Toolbox(root, { maxScanEntries: 10 })
    const out = await tools.run('run_command', { command: 'echo hi > a.txt' })
    expect(out.scanTruncated).toBe(true)
    expect(out.fileChanges).toEqual([{ path: 'a.txt', action: 'created', size: 3, scan_truncated: true }])
  })

  it('counts allocated bytes of the whole tree past the limit when asked (for the disk quota)', async () => {
    const root = await fresh('bytes')
    await writeFile(join(root, 'a'), Buffer.alloc(64 * 1024, 1))
    await writeFile(join(root, 'b'), Buffer.alloc(64 * 1024, 1))
    const all = await scanTree(root, { maxEntries: 0, countAllBytes: true })
    const partial = await scanTree(root, { maxEntries: 1 })
    expect(all.bytes).toBeGreaterThanOrEqual(128 * 1024)
    expect(partial.bytes).toBeLessThan(all.bytes)
  })

  it('a skipped top-level directory has no entries but its bytes still count toward the quota', async () => {
    const root = await fresh('skipped')
    await mkdir(join(root, '.corral'))
    await writeFile(join(root, '.corral', 'session.json'), Buffer.alloc(256 * 1024, 1))
    await writeFile(join(root, 'a'), 'a')
    const withBytes = await scanTree(root, { skipTopLevel: ['.corral'], countAllBytes: true })
    expect([...withBytes.entries.keys()]).toEqual(['a'])
    expect(withBytes.bytes).toBeGreaterThanOrEqual(256 * 1024)
    const without = await scanTree(root, { skipTopLevel: ['.corral'] })
    expect([...without.entries.keys()]).toEqual(['a'])
    expect(without.bytes).toBeLessThan(256 * 1024)
  })

  it('orders paths as the sorted depth-first walk visits them', () => {
    expect(['b', 'a/z', 'a', 'a-b', 'a/b/c'].sort(walkOrder)).toEqual(['a', 'a/b/c', 'a/z', 'a-b', 'b'])
  })

  it('capChanges keeps short lists as they are', () => {
    const few: FileChange[] = [{ path: 'x', action: 'deleted' }]
    expect(capChanges(few, 2)).toBe(few)
  })
})

describe('disk quota', () => {
  it('a shell command or a write that leaves /data over the quota reports it; removing files brings it back under', async () => {
    const root = await fresh('quota')
    const tools = new Toolbox(root, { diskQuotaBytes: 1024 * 1024 })
    const under = await tools.run('run_command', { command: 'head -c 100000 /dev/urandom > small.bin' })
    expect(under).toMatchObject({ isError: false })
    expect(under.diskOver).toBeUndefined()
    const over = await tools.run('run_command', { command: 'head -c 2000000 /dev/urandom > big.bin' })
    expect(over).toMatchObject({ isError: true, diskOver: { quotaBytes: 1024 * 1024 } })
    expect(over.diskOver!.usedBytes).toBeGreaterThan(2_000_000)
    expect(over.output).toMatch(/uses \d+\.\d MB, over its disk quota of 1\.0 MB/)
    expect(await tools.diskOver()).not.toBeNull()
    const write = await tools.run('write_file', { path: 'more.txt', content: 'x' })
    expect(write).toMatchObject({ isError: true, diskOver: { quotaBytes: 1024 * 1024 } })
    expect((await tools.run('run_command', { command: 'rm big.bin' })).diskOver).toBeUndefined()
    expect(await tools.diskOver()).toBeNull()
  })

  it('has no quota unless one is configured', async () => {
    const tools = new Toolbox(await fresh('no-quota'))
    expect(await tools.diskOver()).toBeNull()
  })
})
