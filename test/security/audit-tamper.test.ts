// Tampering with the audit log straight in the database (the SQLite file, PostgreSQL as the
// superuser, the append-only triggers dropped) is reported by verification, each kind precisely:
// a changed decision, a removed row, an inserted row, reordered ids, a truncated tail, and a whole
// log replaced by a consistent forgery that lacks the checkpoint published to the witness; a row
// inserted behind a duplicate leaf; a JSON column that no longer parses; and an export verified in a
// fresh process with only the export and the public key.
import { spawn } from 'node:child_process'
import { cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { v7 as uuidv7 } from 'uuid'
import { describe, expect, it } from 'vitest'
import { bundleInput, createAuditWriter, LogSigner, ProvableLog, verifyLog, writeBundle } from '../../src/audit/index.js'
import { decision } from '../audit/fixtures.js'
import { storeTarget, testDialects } from '../helpers/dialects.js'
import { CORRAL_BIN, hermeticEnv, runCorral } from '../helpers/serve.js'
import { errors, logFixture, type LogFixture } from '../audit/merkle/log-harness.js'
import { quietLogger } from '../audit/writer-helpers.js'

for (const d of testDialects()) {
  describe(`audit log tampering [${d.name}]`, () => {
    /** 30 rows in two checkpoints (20, then 30). */
    async function checkpointed(): Promise<Omit<LogFixture, 'ids'> & { ids: string[] }> {
      const f = await logFixture(await d.open())
      await f.write(20, 'a')
      await f.log.checkpoint()
      await f.write(10, 'b')
      const cps = await f.log.checkpoint()
      expect(cps.map((c) => c.size)).toEqual([30])
      return { ...f, ids: await f.ids() }
    }

    it('a clean log verifies, against its own checkpoints and the witness', async () => {
      const f = await checkpointed()
      const r = await f.verify()
      expect(errors(r)).toEqual([])
      expect(r).toMatchObject({ ok: true, tree_size: 30, checkpoints_verified: 2, latest_checkpoint: 30 })
    })

    it('a changed decision is reported as that row, changed', async () => {
      const f = await checkpointed()
      await f.tamper([['UPDATE audit_events SET decision = ? WHERE id = ?', ['allow', f.ids[3]]]])
      const r = await f.verify()
      expect(r.ok).toBe(false)
      expect(errors(r)).toEqual([`changed ${f.ids[3]}`])
    })

    it('a removed row is reported as removed', async () => {
      const f = await checkpointed()
      await f.tamper([['DELETE FROM audit_events WHERE id = ?', [f.ids[12]]]])
      expect(errors(await f.verify())).toEqual([`removed ${f.ids[12]}`])
    })

    it('a row inserted behind the log is reported as inserted', async () => {
      const f = await checkpointed()
      const id = uuidv7()
      await f.tamper([[`INSERT INTO audit_events (id, org_id, user_id, timestamp, ts, event_type, category, actor, decision)
        SELECT ?, org_id, user_id, timestamp, ts, event_type, category, actor, 'allow' FROM audit_events WHERE id = ?`, [id, f.ids[5]]]])
      expect(errors(await f.verify())).toEqual([`inserted ${id}`])
    })

    it('reordered ids are reported as reordered, both rows', async () => {
      const f = await checkpointed()
      const tmp = uuidv7()
      const [a, b] = [f.ids[7], f.ids[9]]
      await f.tamper([
        ['UPDATE audit_events SET id = ? WHERE id = ?', [tmp, a]],
        ['UPDATE audit_events SET id = ? WHERE id = ?', [a, b]],
        ['UPDATE audit_events SET id = ? WHERE id = ?', [b, tmp]],
      ])
      expect(errors(await f.verify())).toEqual([`reordered ${a}`, `reordered ${b}`].sort())
    })

    it('a truncated tail is reported as truncated, whether or not the tree and checkpoints were cut too', async () => {
      const f = await checkpointed()
      const tail = f.ids.slice(26)
      await f.tamper(tail.map((id) => ['DELETE FROM audit_events WHERE id = ?', [id]] as [string, unknown[]]))
      const rowsOnly = await f.verify()
      expect(errors(rowsOnly)).toEqual(['truncated 26'])
      expect(rowsOnly.findings.find((x) => x.kind === 'truncated')!.message).toContain('leaves 26..29')
      // The thorough attacker also cuts the leaves, the tree and the checkpoint of size 30.
      await f.tamper([
        ['DELETE FROM audit_log_leaves WHERE org_id = ? AND idx >= 26', [f.org]],
        ['DELETE FROM audit_checkpoints WHERE org_id = ? AND size = 30', [f.org]],
      ])
      const all = await f.verify()
      expect(errors(all)).toEqual(['checkpoint_missing 30', 'truncated 30'])
      expect(all.findings.find((x) => x.kind === 'truncated')!.message).toMatch(/the log has 26 leaves, but a checkpoint of size 30 was signed and published to the witness/)
    })

    it('a leaf whose id was edited into one that names no row is reported removed, whatever its shape, and its row inserted', async () => {
      const f = await checkpointed()
      // Not a uuid; shaped like one but not hex (PostgreSQL's read casts uuid-shaped ids, fails, and
      // reads the range again with the exact check); and two texts PostgreSQL's uuid cast would
      // accept for the row but that are not its id.
      const edits: Array<[number, string]> = [
        [2, 'not-a-uuid'],
        [11, 'zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz'],
        [20, `{${f.ids[20]}}`],
        [27, f.ids[27].replaceAll('-', '')],
      ]
      await f.tamper(edits.map(([idx, id]) => ['UPDATE audit_log_leaves SET event_id = ? WHERE org_id = ? AND idx = ?', [id, f.org, idx]] as [string, unknown[]]))
      const r = await f.verify()
      expect(r.ok).toBe(false)
      expect(errors(r)).toEqual([...edits.map(([, id]) => `removed ${id}`), ...edits.map(([idx]) => `inserted ${f.ids[idx]}`)].sort())
      expect(r.findings.filter((x) => x.kind === 'removed').map((x) => x.index)).toEqual(edits.map(([idx]) => idx))
    })

    it('a row inserted behind the log is reported even when a duplicate leaf makes the counts agree', async () => {
      const f = await checkpointed()
      await f.write(1, 'tail')
      await f.log.append()
      const ids = (await f.store.auditLog.leaves(f.org, 0, 1e9)).map((l) => l.eventId)
      const id = uuidv7()
      // The inserted row, plus one more leaf naming an existing row in the unanchored tail: the org has
      // as many rows as leaves that find a row, so only the duplicate shows the row is in no leaf.
      await f.tamper([
        ['DROP INDEX audit_log_leaves_event_idx'],
        [`INSERT INTO audit_events (id, org_id, user_id, timestamp, ts, event_type, category, actor, decision)
          SELECT ?, org_id, user_id, timestamp, ts, event_type, category, actor, 'allow' FROM audit_events WHERE id = ?`, [id, ids[30]]],
        ['INSERT INTO audit_log_leaves (org_id, idx, event_id, leaf_hash) SELECT org_id, 31, event_id, leaf_hash FROM audit_log_leaves WHERE org_id = ? AND idx = 30', [f.org]],
      ])
      expect(errors(await f.verify())).toContain(`inserted ${id}`)
    })

    it('a queued row whose JSON column no longer parses does not stop the appender; verify reports that row changed, online and offline', async () => {
      const f = await logFixture(await d.open())
      await f.write(5, 'a')
      await f.log.checkpoint()
      await f.write(5, 'b')
      const queued = (await f.store.auditLog.pending(100)).map((p) => p.eventId)
      expect(queued).toHaveLength(5)
      // SQLite keeps any text in a JSON column; PostgreSQL's jsonb holds a JSON string, which is not the row's JSON.
      const bad = d.name === 'sqlite' ? 'UPDATE audit_events SET detail = ? WHERE id = ?' : 'UPDATE audit_events SET detail = to_jsonb(?::text) WHERE id = ?'
      await f.tamper([[bad, ['{"truncated', queued[1]]]])
      await f.write(3, 'c')
      // On the appender's own thread, as serve runs it; the round with the row and the rows after it go through.
      const logs: string[] = []
      const threaded = new ProvableLog({ store: f.store, logger: quietLogger(logs), thread: storeTarget(f.store)!, batch: 4 })
      expect(await threaded.append()).toBe(8)
      await threaded.stop()
      expect(await f.store.auditLog.pending(100)).toEqual([])
      expect(logs.some((l) => l.includes('unreadable leaf'))).toBe(true)
      const ids = await f.ids()
      expect(ids.slice(5, 10)).toEqual(queued)
      expect((await f.log.checkpoint()).map((c) => c.size)).toEqual([13])
      expect(errors(await f.verify())).toEqual([`changed ${queued[1]}`])
      const dir = mkdtempSync(join(tmpdir(), 'corral-bundle-'))
      await writeBundle(f.store, f.org, dir, { witness: f.witnessDir })
      expect(errors(await verifyLog(await bundleInput(dir, {})))).toEqual([`changed ${queued[1]}`])
      // The same on this thread (a process without a database file of its own, tests, a memory database).
      await f.write(2, 'd')
      const ids2 = (await f.store.auditLog.pending(100)).map((p) => p.eventId)
      await f.tamper([[bad, ['not json', ids2[0]]]])
      expect(await f.log.append()).toBe(2)
      expect(errors(await f.verify())).toEqual([`changed ${queued[1]}`, `changed ${ids2[0]}`].sort())
    })

    it('a consistent forgery that lacks the published checkpoint is caught by the witness', async () => {
      const f = await checkpointed()
      // Replace the whole log: rows, leaves, tree and checkpoints, rebuilt and signed with a key of the forger's.
      await f.tamper([
        ['DELETE FROM audit_events WHERE org_id = ?', [f.org]],
        ['DELETE FROM audit_log_leaves WHERE org_id = ?', [f.org]],
        ['DELETE FROM audit_log_trees WHERE org_id = ?', [f.org]],
        ['DELETE FROM audit_checkpoints WHERE org_id = ?', [f.org]],
        ['DELETE FROM audit_log_keys', []],
      ])
      const forger = new ProvableLog({ store: f.store, logger: quietLogger(), signer: await LogSigner.open(mkdtempSync(join(tmpdir(), 'corral-forger-'))) })
      // The forger writes the org's rows again (different content), through the real writer.
      const w = createAuditWriter(f.store, { logger: quietLogger() })
      await Promise.all(Array.from({ length: 30 }, (_, i) => w.emit(decision(f.org, { path: `/forged/${i}` }))))
      await w.flush()
      await forger.checkpoint()
      // On its own, the forgery is consistent: its checkpoints verify with the keys it carries.
      const self = await f.verify({})
      expect(errors(self)).toEqual([])
      // Against the witness (its checkpoints and keys), every published checkpoint is missing and the forger's key is untrusted.
      const r = await f.verify()
      expect(r.ok).toBe(false)
      const kinds = errors(r)
      expect(kinds).toContain('checkpoint_missing 20')
      expect(kinds).toContain('checkpoint_missing 30')
      expect(kinds).toContain('checkpoint_invalid 30')
      expect(kinds).toContain('tree_mismatch 20')
    })
  })
}

describe('audit log tampering that only SQLite can store', () => {
  const [sqlite] = testDialects()
  it('a JSON column edited into text that is not JSON is a changed row, not a failed verification', async () => {
    const f = await logFixture(await sqlite.open())
    await f.write(6)
    await f.log.checkpoint()
    const ids = await f.ids()
    await f.tamper([['UPDATE audit_events SET detail = ? WHERE id = ?', ['{"truncated', ids[2]]]])
    expect(errors(await f.verify())).toEqual([`changed ${ids[2]}`])
    // The export writes the row's text as it is; offline it is the same finding.
    const dir = mkdtempSync(join(tmpdir(), 'corral-bundle-'))
    await writeBundle(f.store, f.org, dir, { witness: f.witnessDir })
    expect(errors(await verifyLog(await bundleInput(dir, {})))).toEqual([`changed ${ids[2]}`])
  })
})

// An auditor's machine: a copy of the export and the public key, a process with no store, no data
// dir, no corral environment, run from an empty directory.
describe('an export verified elsewhere', () => {
  const [sqlite] = testDialects()
  it('verifies in a fresh process with only the export directory and the public key; a changed line fails it', async () => {
    const f = await logFixture(await sqlite.open())
    await f.write(40)
    await f.log.checkpoint()
    await f.write(5)
    await f.log.checkpoint()
    const exported = mkdtempSync(join(tmpdir(), 'corral-export-'))
    await writeBundle(f.store, f.org, exported)
    const vkey = (await f.store.auditLog.keys())[0].vkey
    await f.store.close()
    const elsewhere = mkdtempSync(join(tmpdir(), 'corral-auditor-'))
    const copy = join(elsewhere, 'export')
    cpSync(exported, copy, { recursive: true })
    writeFileSync(join(elsewhere, 'corral.vkey'), `${vkey}\n`)
    const verify = () => auditorRun(['audit', 'verify', '--dir', copy, '--key', join(elsewhere, 'corral.vkey')], elsewhere)
    const ok = await verify()
    expect(ok.stderr).toBe('')
    expect(ok.code).toBe(0)
    expect(ok.stdout).toMatch(new RegExp(`^ok: ${f.org}: 45 rows verified against 2 signed checkpoint`, 'm'))
    const lines = readFileSync(join(copy, 'rows.jsonl'), 'utf8').split('\n')
    lines[17] = lines[17].replace('"path":"/w/17"', '"path":"/w/71"')
    writeFileSync(join(copy, 'rows.jsonl'), lines.join('\n'))
    const bad = await verify()
    expect(bad.code).toBe(1)
    expect(bad.stdout).toMatch(/^FAIL changed: row \S+ \(leaf 17\) was changed after it was appended$/m)
  })
})

/** The built binary in `home` (its cwd and HOME), with no CORRAL_ variable at all. */
function auditorRun(args: string[], home: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env = { ...hermeticEnv(), HOME: home, XDG_CONFIG_HOME: home, XDG_DATA_HOME: home, NO_COLOR: '1' }
  return new Promise((done) => {
    const child = spawn(process.execPath, [CORRAL_BIN, ...args], { env, cwd: home, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c) => (stdout += String(c)))
    child.stderr.on('data', (c) => (stderr += String(c)))
    child.once('close', (code) => done({ code, stdout, stderr }))
  })
}

// The binary's report (SQLite: the CLI opens the file the test tampered with; PostgreSQL schemas
// of the test stores are not reachable by URL alone).
describe('corral audit verify reports tampering, one line per finding', () => {
  const [sqlite] = testDialects()
  it('prints FAIL lines naming each row and exits 1; --json carries the same findings', async () => {
    const f = await logFixture(await sqlite.open())
    await f.write(12)
    await f.log.checkpoint()
    const ids = await f.ids()
    await f.tamper([
      ['UPDATE audit_events SET decision = ? WHERE id = ?', ['allow', ids[0]]],
      ['DELETE FROM audit_events WHERE id = ?', [ids[5]]],
    ])
    const db = storeTarget(f.store)!.url
    const run = await runCorral(['audit', 'verify', '--org', f.org, '--db', db, '--witness', f.witnessDir])
    expect(run.code).toBe(1)
    const fails = run.stdout.split('\n').filter((l) => l.startsWith('FAIL '))
    expect(fails).toEqual([
      `FAIL removed: row ${ids[5]} (leaf 5) was removed`,
      `FAIL changed: row ${ids[0]} (leaf 0) was changed after it was appended`,
    ])
    expect(run.stdout).toMatch(new RegExp(`^FAILED: ${f.org}: 2 finding\\(s\\) in a log of 12 rows$`, 'm'))
    const json = await runCorral(['audit', 'verify', '--org', f.org, '--db', db, '--witness', f.witnessDir, '--json'])
    expect(json.code).toBe(1)
    const report = JSON.parse(json.stdout)
    expect(report.ok).toBe(false)
    expect(report.findings.filter((x: { error: boolean }) => x.error).map((x: { kind: string; id: string }) => `${x.kind} ${x.id}`).sort()).toEqual([`changed ${ids[0]}`, `removed ${ids[5]}`].sort())
  })
})
