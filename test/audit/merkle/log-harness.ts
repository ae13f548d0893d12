// A provable log on a real store for the tamper, replica and export suites: rows written by the
// real audit writer, the appender and checkpointer of serve, a key in a temp data dir and a
// witness directory; `verify` checks on the verification threads and in-process alike; `tamper` runs SQL straight on the database as its owner (SQLite file through
// better-sqlite3, PostgreSQL as the superuser) with the append-only triggers dropped first.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import pg from 'pg'
import { createAuditWriter, databaseInput, LogSigner, ProvableLog, verifyLog, WitnessDir, type VerifyReport } from '../../../src/audit/index.js'
import type { Store } from '../../../src/store/index.js'
import { storeTarget } from '../../helpers/dialects.js'
import { decision, orgId } from '../fixtures.js'
import { quietLogger } from '../writer-helpers.js'

export interface LogFixture {
  store: Store
  org: string
  dataDir: string
  witnessDir: string
  log: ProvableLog
  /** Writes `n` rows for the org through the audit writer and waits until they are committed. */
  write(n: number, tag?: string): Promise<void>
  verify(trust?: { witness?: string; keys?: string[] }): Promise<VerifyReport>
  /** The org's leaves' event ids in log order. */
  ids(): Promise<string[]>
  tamper(statements: ReadonlyArray<[string, unknown[]?]>): Promise<void>
}

export async function logFixture(store: Store, opts: { dataDir?: string; witnessDir?: string } = {}): Promise<LogFixture> {
  const org = orgId()
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'corral-log-'))
  const witnessDir = opts.witnessDir ?? mkdtempSync(join(tmpdir(), 'corral-witness-'))
  const writer = createAuditWriter(store, { logger: quietLogger() })
  const log = new ProvableLog({ store, logger: quietLogger(), signer: await LogSigner.open(dataDir), witness: new WitnessDir(witnessDir) })
  let written = 0
  return {
    store, org, dataDir, witnessDir, log,
    async write(n, tag = 'w') {
      const all = []
      for (let i = 0; i < n; i++) all.push(writer.emit(decision(org, { path: `/${tag}/${written++}`, decision: i % 3 === 0 ? 'deny' : 'allow', ...(i % 3 === 0 ? { reason: 'no_match' } : {}) })))
      await Promise.all(all)
      await writer.flush()
    },
    // On the verification threads (as `corral audit verify --org` runs), and on this thread: the
    // two must report the same, finding for finding.
    async verify(trust = { witness: witnessDir }) {
      const threaded = await verifyLog(await databaseInput(store, org, trust, { thread: storeTarget(store) }))
      const inProcess = await verifyLog(await databaseInput(store, org, trust))
      if (JSON.stringify(threaded) !== JSON.stringify(inProcess)) {
        throw new Error(`verification on threads and in-process differ:\n${JSON.stringify(threaded)}\n${JSON.stringify(inProcess)}`)
      }
      return threaded
    },
    async ids() {
      return (await store.auditLog.leaves(org, 0, 1e9)).map((l) => l.eventId)
    },
    tamper: (statements) => tamper(store, statements),
  }
}

/** Runs SQL (`?` placeholders) on the store's database as its owner, triggers dropped. */
export async function tamper(store: Store, statements: ReadonlyArray<[string, unknown[]?]>): Promise<void> {
  const target = storeTarget(store)
  if (!target) throw new Error('tamper: the store was not opened through testDialects()')
  if (store.dialect === 'sqlite') {
    const db = new Database(target.url.replace(/^sqlite:/, ''))
    try {
      for (const { name } of db.prepare(`SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'audit_events'`).all() as Array<{ name: string }>) {
        db.exec(`DROP TRIGGER "${name}"`)
      }
      for (const [text, params] of statements) db.prepare(text).run(...(params ?? []))
      // Later rows reach the log again, as on PostgreSQL where the triggers are only disabled meanwhile.
      db.exec(`CREATE TRIGGER audit_events_enqueue AFTER INSERT ON audit_events
        BEGIN INSERT INTO audit_log_pending (event_id, org_id) VALUES (NEW.id, NEW.org_id); END`)
    } finally {
      db.close()
    }
    return
  }
  const client = new pg.Client({ connectionString: target.url })
  await client.connect()
  try {
    await client.query(`SET search_path = "${target.schema}"`)
    await client.query('ALTER TABLE audit_events DISABLE TRIGGER ALL')
    for (const [text, params] of statements) {
      let n = 0
      await client.query(text.replace(/\?/g, () => `$${++n}`), params ?? [])
    }
    await client.query('ALTER TABLE audit_events ENABLE TRIGGER ALL')
  } finally {
    await client.end()
  }
}

/** The error findings of a report as `kind id-or-size` strings, sorted. */
export function errors(r: VerifyReport): string[] {
  return r.findings.filter((f) => f.error).map((f) => `${f.kind} ${f.id ?? f.size ?? f.index ?? ''}`.trim()).sort()
}

/** Where a suite's appender runs: on the caller's thread, or on a thread of its own as serve runs it. */
export const APPENDER_MODES = [
  { name: "the caller's thread", thread: false },
  { name: 'its own thread', thread: true },
] as const

/** A log over `store` (quiet logger) whose rounds run where `mode` says, with `opts` beside. */
export function logOn(mode: (typeof APPENDER_MODES)[number], store: Store, opts: Partial<ConstructorParameters<typeof ProvableLog>[0]> = {}): ProvableLog {
  return new ProvableLog({ store, logger: quietLogger(), ...opts, ...(mode.thread ? { thread: storeTarget(store)! } : {}) })
}
