// Verification checks a log in ranges of RANGE leaves on worker threads and folds their subtrees;
// these logs span several ranges with checkpoints inside them (not at a range's edge), so the
// folding, a checkpoint's root taken from a range's edge, and an export's files cut into blocks of
// lines (LF or CRLF, blank lines between) are exercised past the first range. The threaded and
// in-process walks must report the same (the harness's verify compares them).
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { bundleInput, verifyLog, writeBundle } from '../../../src/audit/index.js'
import { RANGE } from '../../../src/audit/merkle/range-check.js'
import { testDialects } from '../../helpers/dialects.js'
import { errors, logFixture } from './log-harness.js'

for (const d of testDialects()) {
  describe(`verification across ranges [${d.name}]`, () => {
    it('verifies a log of several ranges with checkpoints inside them; a changed row in a later range is that row', { timeout: 300_000 }, async () => {
      const f = await logFixture(await d.open())
      await f.write(RANGE + 1_000)
      await f.log.checkpoint()
      await f.write(RANGE + 333)
      await f.log.checkpoint()
      const size = 2 * RANGE + 1_333
      const clean = await f.verify()
      expect(errors(clean)).toEqual([])
      expect(clean).toMatchObject({ ok: true, tree_size: size, checkpoints_verified: 2, latest_checkpoint: size })

      const ids = await f.ids()
      const bad = ids[RANGE * 2 + 5]
      await f.tamper([['UPDATE audit_events SET path = ? WHERE id = ?', ['/tampered', bad]]])
      expect(errors(await f.verify())).toEqual([`changed ${bad}`])

      // A leaf id of a uuid's shape that is not one, deep in the second range: that range is read
      // again after some of its rows were (PostgreSQL), and counts them once.
      const shaped = 'zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz'
      await f.tamper([['UPDATE audit_log_leaves SET event_id = ? WHERE org_id = ? AND idx = ?', [shaped, f.org, RANGE + 9_000]]])
      const r = await f.verify()
      expect(errors(r)).toEqual([`changed ${bad}`, `inserted ${ids[RANGE + 9_000]}`, `removed ${shaped}`].sort())
      expect(r.tree_size).toBe(size)
    })
  })
}

describe('an export of several ranges', () => {
  const [sqlite] = testDialects()
  it('verifies with CRLF line ends and blank lines; a changed line in a later block is that row', { timeout: 300_000 }, async () => {
    const f = await logFixture(await sqlite.open())
    await f.write(RANGE + 2_000)
    await f.log.checkpoint()
    await f.write(100)
    await f.log.checkpoint()
    const dir = mkdtempSync(join(tmpdir(), 'corral-bundle-'))
    await writeBundle(f.store, f.org, dir, { witness: f.witnessDir })
    const size = RANGE + 2_100
    const ok = await verifyLog(await bundleInput(dir, {}))
    expect(errors(ok)).toEqual([])
    expect(ok).toMatchObject({ ok: true, tree_size: size, checkpoints_verified: 2 })

    // The same files as an editor on another system might save them: CRLF, and blank lines here and there.
    for (const name of ['rows.jsonl', 'leaves.jsonl']) {
      const lines = readFileSync(join(dir, name), 'utf8').split('\n')
      writeFileSync(join(dir, name), lines.map((l, i) => (i % 997 === 0 ? `\r\n${l}` : l)).join('\r\n'))
    }
    expect(errors(await verifyLog(await bundleInput(dir, {})))).toEqual([])

    const rows = readFileSync(join(dir, 'rows.jsonl'), 'utf8').split('\r\n').filter((l) => l.length > 0)
    const at = RANGE + 17
    const id = (JSON.parse(rows[at]) as { id: string }).id
    const text = readFileSync(join(dir, 'rows.jsonl'), 'utf8').replace(rows[at], rows[at].replace('"decision":"', '"decision":"x'))
    writeFileSync(join(dir, 'rows.jsonl'), text)
    const r = await verifyLog(await bundleInput(dir, {}))
    expect(errors(r)).toEqual([`changed ${id}`])
    expect(r.findings.find((x) => x.kind === 'changed')!.index).toBe(at)
  })
})
