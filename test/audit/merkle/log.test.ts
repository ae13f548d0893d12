// The provable log on both dialects: the same rows give the same leaf bytes on SQLite and
// PostgreSQL; two replicas appending and checkpointing at once build one tree and one sequence of
// checkpoints; a key rotation keeps old checkpoints verifiable; an export verifies with no
// database, and a changed line in it is reported; a row queued twice is appended once.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  bundleInput, consistencyFor, createAuditWriter, inclusionFor, LogSigner, ProvableLog, rotateLogKey, verifyLog, WitnessDir, writeBundle,
} from '../../../src/audit/index.js'
import { canonicalJson, canonicalRow, hashLeaf, openCheckpoint, parseVerifierKey, subtreeRoot, verifyConsistency, verifyInclusion } from '../../../src/audit/merkle/index.js'
import type { NewAuditEvent } from '../../../src/contract/index.js'
import { openSibling, storeTarget, testDialects } from '../../helpers/dialects.js'
import { decision } from '../fixtures.js'
import { quietLogger } from '../writer-helpers.js'
import { errors, logFixture, tamper } from './log-harness.js'

const dialects = testDialects()

/** Rows whose JSON the two dialects store differently (JSONB reorders keys, normalises numbers). */
function awkward(org: string): NewAuditEvent[] {
  return [
    decision(org, { id: '01900000-0000-7000-8000-000000000001', timestamp: '2026-01-01T00:00:00.000Z', detail: { z: 1, a: [1.5, 1e21, -0, 'é\u2028'], m: { y: null, b: true } } }),
    decision(org, { id: '01900000-0000-7000-8000-000000000002', timestamp: '2026-01-01T00:00:00.001Z', detail: { 'ключ': '😀', '': 0.1, '1': 10 }, debits: { tokens: 12345678901 } }),
    decision(org, { id: '01900000-0000-7000-8000-000000000003', timestamp: '2026-01-01T00:00:00.002Z', decision: 'deny', reason: 'no_match', detail: undefined, budget_state: undefined }),
  ] as NewAuditEvent[]
}

describe('leaf encoding', () => {
  it('is the same bytes on every dialect', async () => {
    const roots = new Set<string>()
    const leafSets = new Set<string>()
    for (const d of dialects) {
      const store = await d.open()
      const org = 'org_awkward'
      const w = createAuditWriter(store, { logger: quietLogger() })
      for (const e of awkward(org)) await w.emit(e)
      await w.flush()
      const log = new ProvableLog({ store, logger: quietLogger() })
      await log.append()
      roots.add((await store.auditLog.tree(org))!.root)
      leafSets.add(JSON.stringify(await store.auditLog.leaves(org, 0, 10)))
    }
    expect(roots.size).toBe(1)
    expect(leafSets.size).toBe(1)
  })

  it('is RFC 8785: sorted keys, no whitespace, ECMAScript numbers', () => {
    expect(canonicalJson({ b: [1.5, 1e21, -0, 1e-7], a: { d: 'é', c: null } })).toBe('{"a":{"c":null,"d":"é"},"b":[1.5,1e+21,0,1e-7]}')
    expect(canonicalJson({ '\u20ac': 1, '\r': 2, '1': 3, 'ö': 4 })).toBe('{"\\r":2,"1":3,"ö":4,"€":1}')
  })
})

for (const d of dialects) {
  describe(`provable log [${d.name}]`, () => {
    it('two replicas appending and checkpointing at once build one tree and one sequence of checkpoints', async () => {
      const a = await logFixture(await d.open())
      // SQLite is one process's store (docs/storage.md): its two appenders share the handle; PostgreSQL's are two pools.
      const other = d.name === 'postgres' ? await openSibling(a.store) : a.store
      // Replica B appends as serve does: on its own thread, through a connection of its own.
      const b = new ProvableLog({ store: other, logger: quietLogger(), signer: await LogSigner.open(mkdtempSync(join(tmpdir(), 'corral-b-'))), witness: new WitnessDir(a.witnessDir), thread: storeTarget(a.store)! })
      const writerB = createAuditWriter(other, { logger: quietLogger() })
      for (let round = 0; round < 5; round++) {
        await Promise.all([
          a.write(40, `r${round}`),
          Promise.all(Array.from({ length: 40 }, (_, i) => writerB.emit(decision(a.org, { path: `/b/${round}/${i}` })))),
          a.log.append(), b.append(), a.log.checkpoint(), b.checkpoint(),
        ])
      }
      await writerB.flush()
      await Promise.all([a.log.checkpoint(), b.checkpoint()])
      await Promise.all([a.log.checkpoint(), b.checkpoint()])
      const leaves = await a.store.auditLog.leaves(a.org, 0, 1e6)
      expect(leaves.length).toBe(400)
      expect(new Set(leaves.map((l) => l.eventId)).size).toBe(400)
      expect(leaves.map((l) => l.idx)).toEqual(leaves.map((_, i) => i))
      await b.stop()
      const cps = await a.store.auditLog.checkpoints(a.org)
      expect(cps.at(-1)!.size).toBe(400)
      // Both replicas' keys are trusted through the witness; every pair of checkpoints is consistent.
      const r = await a.verify()
      expect(errors(r)).toEqual([])
      for (let i = 1; i < cps.length; i++) {
        const p = (await consistencyFor(a.store, a.org, cps[i - 1].size, cps[i].size))!
        expect(verifyConsistency(p.from_size, p.to_size, p.proof.map((h) => Buffer.from(h, 'hex')), Buffer.from(p.from_root, 'hex'), Buffer.from(p.to_root, 'hex'))).toBe(true)
      }
    })

    it('appends on its own thread in commit order: each org\'s leaves are its queued rows, in queue order, hashed from their content', async () => {
      const f = await logFixture(await d.open())
      const other = `${f.org}_b`
      const w = createAuditWriter(f.store, { logger: quietLogger() })
      // Two orgs interleaved across several writer batches; more rows than one round takes.
      for (let round = 0; round < 4; round++) {
        await Promise.all(Array.from({ length: 150 }, (_, i) => w.emit(decision(i % 3 ? f.org : other, { path: `/${round}/${i}`, detail: { z: i, a: [round] } }))))
      }
      await w.flush()
      const queued = await f.store.auditLog.pending(10_000)
      const log = new ProvableLog({ store: f.store, logger: quietLogger(), thread: storeTarget(f.store)!, batch: 128 })
      expect(await log.append()).toBe(600)
      await log.stop()
      const rows = await f.store.auditLog.rows(queued.map((q) => q.eventId))
      for (const org of [f.org, other]) {
        const expected = queued.filter((q) => q.orgId === org).map((q) => q.eventId)
        const leaves = await f.store.auditLog.leaves(org, 0, 10_000)
        expect(leaves.map((l) => l.eventId)).toEqual(expected)
        expect(leaves.map((l) => l.leafHash)).toEqual(expected.map((id) => hashLeaf(canonicalRow(rows.get(id)!)).toString('hex')))
        const tree = (await f.store.auditLog.tree(org))!
        expect(tree.root).toBe(subtreeRoot(leaves.map((l) => Buffer.from(l.leafHash, 'hex'))).toString('hex'))
      }
      expect(await f.store.auditLog.pending(10)).toEqual([])
      await f.log.checkpoint()
      expect(errors(await f.verify())).toEqual([])
    })

    it('a rotated key signs the next checkpoints; the old ones still verify with the old public key', async () => {
      const f = await logFixture(await d.open())
      await f.write(10)
      const [first] = await f.log.checkpoint()
      const next = await rotateLogKey(f.dataDir)
      await f.write(5)
      const [second] = await f.log.checkpoint()
      expect(first.keyName).not.toBe(second.keyName)
      expect(second.keyName).toBe(next.verifier.name)
      expect((await f.store.auditLog.keys()).map((k) => k.name).sort()).toEqual([first.keyName, second.keyName].sort())
      expect(errors(await f.verify())).toEqual([])
      // Trusting only the new key, the old checkpoint is reported, not silently accepted.
      const onlyNew = await f.verify({ keys: [next.verifier.vkey] })
      expect(errors(onlyNew)).toEqual(['checkpoint_invalid 10'])
    })

    it('an export verifies with no database, only the public key; a changed line in it is reported', async () => {
      const f = await logFixture(await d.open())
      await f.write(25)
      await f.log.checkpoint()
      const dir = mkdtempSync(join(tmpdir(), 'corral-bundle-'))
      expect(await writeBundle(f.store, f.org, dir, { witness: f.witnessDir })).toEqual({ treeSize: 25, checkpoints: 1 })
      const vkey = readFileSync(join(f.witnessDir, 'keys', `${(await f.store.auditLog.keys())[0].name}.vkey`), 'utf8')
      await f.store.close()
      const clean = await verifyLog(await bundleInput(dir, { keys: [vkey] }))
      expect(errors(clean)).toEqual([])
      expect(clean.tree_size).toBe(25)
      // Each line of rows.jsonl is a leaf's bytes, so the leaf hash is computable with any SHA-256 tool.
      const lines = readFileSync(join(dir, 'rows.jsonl'), 'utf8').trim().split('\n')
      const leaves = readFileSync(join(dir, 'leaves.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { leaf_hash: string; id: string })
      expect(hashLeaf(lines[4]).toString('hex')).toBe(leaves[4].leaf_hash)
      lines[4] = lines[4].replace('"decision":"deny"', '"decision":"allow"').replace('"decision":"allow","destination"', '"decision":"deny","destination"')
      writeFileSync(join(dir, 'rows.jsonl'), `${lines.join('\n')}\n`)
      expect(errors(await verifyLog(await bundleInput(dir, { keys: [vkey] })))).toEqual([`changed ${leaves[4].id}`])
    })

    it('answers inclusion proofs any RFC 6962 verifier accepts, against the signed root', async () => {
      const f = await logFixture(await d.open())
      await f.write(13)
      const [cp] = await f.log.checkpoint()
      const vk = parseVerifierKey((await f.store.auditLog.keys())[0].vkey)!
      const opened = openCheckpoint(cp.note, [vk])
      expect(opened.ok).toBe(true)
      for (const id of await f.ids()) {
        const p = await inclusionFor(f.store, f.org, id)
        if (typeof p === 'string') throw new Error(p)
        expect(verifyInclusion(p.leaf_index, p.tree_size, Buffer.from(p.leaf_hash, 'hex'), p.proof.map((h) => Buffer.from(h, 'hex')), opened.ok ? opened.checkpoint.root : Buffer.alloc(0))).toBe(true)
      }
      expect(await inclusionFor(f.store, f.org, '01900000-0000-7000-8000-00000000abcd')).toBe('no_leaf')
    })

    it('a row queued twice is appended once and does not stall the queue', async () => {
      const f = await logFixture(await d.open())
      await f.write(3)
      await f.log.append()
      const [first] = await f.ids()
      await tamper(f.store, [['INSERT INTO audit_log_pending (event_id, org_id) VALUES (?, ?)', [first, f.org]]])
      await f.write(2)
      await f.log.checkpoint()
      expect((await f.ids()).length).toBe(5)
      expect(await f.store.auditLog.pending(10)).toEqual([])
      expect(errors(await f.verify())).toEqual([])
    })

    it('names rows committed but not yet appended as pending, not as a failure', async () => {
      const f = await logFixture(await d.open())
      await f.write(4)
      await f.log.checkpoint()
      await f.write(2)
      const r = await f.verify()
      expect(r.ok).toBe(true)
      expect(r.findings.map((x) => x.kind)).toContain('pending')
    })
  })
}
