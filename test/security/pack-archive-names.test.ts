// A hostile pack archive is refused naming the entry that is wrong — the one its author must fix —
// whatever the shape: a hardlink or symlink pointing out (by `..` or an absolute target), an
// absolute or climbing entry name, a device or fifo, an over-long or too-deep name, a duplicate.
// A link's refusal names the link entry first, then where it points.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { CorralError } from '../../src/contract/index.js'
import { extractPackArchive } from '../../src/packs/archive.js'
import { MANIFEST, tgzOf, type TestEntry } from '../packs/archives.js'

const base = mkdtempSync(join(tmpdir(), 'corral-archive-names-'))
afterAll(() => rmSync(base, { recursive: true, force: true }))
let n = 0

async function refusal(entries: TestEntry[]): Promise<CorralError> {
  try {
    await extractPackArchive(await tgzOf([{ name: 'pack.yaml', body: MANIFEST }, { name: 'lib/ok.txt', body: 'ok' }, ...entries]), join(mkdtempSync(join(base, `t${++n}-`)), 'x'))
  } catch (err) {
    expect(err).toBeInstanceOf(CorralError)
    return err as CorralError
  }
  throw new Error('expected a refusal')
}

const deep = Array.from({ length: 70 }, () => 'd').join('/')

describe('pack archive refusals name the entry', () => {
  it.each<[string, TestEntry[], string, RegExp]>([
    ['hardlink climbing out with ..', [{ name: 'lib/evil-hard', type: 'link', linkname: '../../etc/passwd' }], '"lib/evil-hard"', /hardlink "lib\/evil-hard" points outside the pack: its target "\.\.\/\.\.\/etc\/passwd" climbs out/],
    ['hardlink to an absolute path', [{ name: 'abs-hard', type: 'link', linkname: '/etc/shadow' }], '"abs-hard"', /hardlink "abs-hard" points outside the pack: its target "\/etc\/shadow" has an absolute path/],
    ['hardlink to nothing in the archive', [{ name: 'lonely', type: 'link', linkname: 'missing' }], '"lonely"', /hardlink "lonely" does not point to a file/],
    ['symlink climbing out', [{ name: 'lib/evil-sym', type: 'symlink', linkname: '../../etc/passwd' }], '"lib/evil-sym"', /symlink "lib\/evil-sym" points outside/],
    ['absolute symlink', [{ name: 'abs-sym', type: 'symlink', linkname: '/etc/passwd' }], '"abs-sym"', /symlink "abs-sym" points outside/],
    ['absolute entry name', [{ name: '/etc/cron.d/x', body: 'x' }], '"/etc/cron.d/x"', /absolute path/],
    ['entry climbing out with ..', [{ name: 'lib/../../x', body: 'x' }], '"lib/../../x"', /climbs out/],
    ['character device', [{ name: 'dev/null', type: 'character-device' }], '"dev/null"', /character-device/],
    ['block device', [{ name: 'dev/sda', type: 'block-device' }], '"dev/sda"', /block-device/],
    ['fifo', [{ name: 'pipe', type: 'fifo' }], '"pipe"', /fifo/],
    ['name nested too deep', [{ name: `${deep}/f`, body: 'x' }], '"d/d/d/d', /nested deeper/],
    ['duplicate entry', [{ name: 'lib/ok.txt', body: 'again' }], '"lib/ok.txt"', /more than once/],
  ])('%s', async (_shape, entries, name, message) => {
    const err = await refusal(entries)
    expect(err.code).toBe('validation_error')
    expect(err.message).toContain(name)
    expect(err.message).toMatch(message)
    expect(String((err.details?.fields as { archive?: string }).archive)).toContain(name)
  })
})
