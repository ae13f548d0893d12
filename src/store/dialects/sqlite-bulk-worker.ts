// Bulk inserts into a SQLite file from a worker thread with its own better-sqlite3 connection, so
// the audit log's group commit (statement execution, transaction, WAL append, checkpoints) never
// runs on the main thread, where it would stall the proxy's event loop in bursts
// (docs/storage.md). WAL lets the main connection read while the worker writes;
// busy_timeout makes either side wait for the other's short write transaction.
//
// The worker is plain JavaScript evaluated from a string, so the same code runs from tsx sources
// and from dist. It is referenced only while a batch is in flight (an idle worker never keeps a
// CLI process alive) and respawned after a crash; a crash fails the batches in flight with an
// error the audit writer treats as transient (it retries them). A worker thread holds its own V8
// heap and SQLite cache (about 10 MB), so one that had nothing to write for IDLE_EXIT_MS closes;
// the next batch starts another.

import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import { workerLimits } from '../../proc/index.js'
import { rowsOfJsonRecords, rowsOfRecords, rowsOfRecordsParsed } from './json-records.js'

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads')
${rowsOfJsonRecords.toString()}
${rowsOfRecordsParsed.toString()}
${rowsOfRecords.toString()}
const Database = require(workerData.driver)
const db = new Database(workerData.file)
db.pragma('journal_mode = WAL')
db.pragma('busy_timeout = 5000')
db.pragma('synchronous = NORMAL')
db.pragma('wal_autocheckpoint = 10000')
const statements = new Map()
const prepared = (text) => {
  let stmt = statements.get(text)
  if (!stmt) statements.set(text, (stmt = db.prepare(text)))
  return stmt
}
parentPort.on('message', (m) => {
  if (m.close) {
    db.close()
    process.exit(0)
  }
  if (m.checkpoint) {
    // PASSIVE: copies what no reader still needs and never waits for a lock or a reader.
    try {
      db.pragma('wal_checkpoint(PASSIVE)')
      parentPort.postMessage({ seq: m.seq, inserted: [] })
    } catch (err) {
      parentPort.postMessage({ seq: m.seq, error: { message: String(err && err.message), code: err && err.code, name: err && err.name } })
    }
    return
  }
  try {
    const stmt = prepared(m.text)
    const strict = prepared(m.strict)
    const inserted = []
    // Records, each one JSON object, read here, off the main thread (json-records.ts rowsOfRecords):
    // joined into the array text here, in one join (this copy's first and last get the brackets).
    let rows = m.rows
    if (m.records !== undefined) {
      const r = m.records
      if (r.length > 0) {
        r[0] = '[' + r[0]
        r[r.length - 1] += ']'
      }
      rows = r.length > 0 ? rowsOfRecords(r.join(','), m.names, m.jsonColumns) : []
    }
    // A row the first statement skipped is a repeat or refused by a constraint: the second one
    // (sqlite.ts insertText) skips only a repeat and throws the constraint's own error otherwise.
    db.transaction(() => {
      for (const row of rows) if (stmt.run(row).changes === 1 || strict.run(row).changes === 1) inserted.push(String(row[m.keyIndex]))
    }).immediate()
    parentPort.postMessage({ seq: m.seq, inserted })
  } catch (err) {
    parentPort.postMessage({ seq: m.seq, error: { message: String(err && err.message), code: err && err.code, name: err && err.name } })
  }
})
`

/** A bulk insert's two statements: `text` ignores every conflict, `strict` only a repeated key. */
export interface BulkInsertText {
  text: string
  strict: string
}

/** A worker with no batch for this long closes its connection and exits (default). */
const IDLE_EXIT_MS = 30_000

interface Pending {
  resolve: (ids: string[]) => void
  reject: (err: Error) => void
}

export class SqliteBulkWorker {
  readonly #file: string
  #worker: Worker | undefined
  #seq = 0
  readonly #pending = new Map<number, Pending>()
  #closed = false
  #idle: NodeJS.Timeout | undefined
  #retiring: { worker: Worker; exited: Promise<void> } | undefined
  readonly #idleExitMs: number

  constructor(file: string, options: { idleExitMs?: number } = {}) {
    this.#file = file
    this.#idleExitMs = options.idleExitMs ?? IDLE_EXIT_MS
  }

  /** Whether a worker thread is up (it starts with the first batch and exits when idle). */
  get running(): boolean {
    return this.#worker !== undefined
  }

  /**
   * Runs `text` (an INSERT with one placeholder per column) for every row in one transaction, and
   * `strict` for a row `text` skipped (sqlite.ts insertText has both).
   */
  run(text: BulkInsertText, rows: readonly unknown[][], keyIndex: number): Promise<string[]> {
    return this.#send({ ...text, rows, keyIndex })
  }

  /**
   * The same for `records`, each a JSON object keyed by column name (`names`; JSON columns
   * flagged), read on the worker: each string crosses as one copy, where rows would be
   * structured-cloned value by value on this thread. Joined into the array text there, not here: a
   * batch's text (hundreds of KB) is a large object, mapped, faulted in page by page and unmapped
   * again, and here it was made twice per batch (the join, then its flattening with the brackets).
   */
  runRecords(text: BulkInsertText, records: readonly string[], jsonColumns: readonly boolean[], names: readonly string[], keyIndex: number): Promise<string[]> {
    return this.#send({ ...text, records, jsonColumns, names, keyIndex })
  }

  /**
   * Copies the WAL's committed frames into the database file on the worker's connection (a
   * PASSIVE checkpoint), starting a worker when none is up: the main connection's writes do not
   * checkpoint on the event loop (sqlite.ts), so this is how a WAL they grew is brought back.
   */
  async checkpoint(): Promise<void> {
    await this.#send({ checkpoint: true })
  }

  #send(m: { checkpoint: true } | { text: string; strict: string; keyIndex: number; rows?: readonly unknown[][]; records?: readonly string[]; jsonColumns?: readonly boolean[]; names?: readonly string[] }): Promise<string[]> {
    if (this.#closed) return Promise.reject(Object.assign(new Error('the database connection is not open'), { code: 'SQLITE_MISUSE_CLOSED' }))
    const worker = this.#worker ?? this.#spawn()
    clearTimeout(this.#idle)
    const seq = ++this.#seq
    return new Promise<string[]>((resolve, reject) => {
      this.#pending.set(seq, { resolve, reject })
      if (this.#pending.size === 1) worker.ref()
      worker.postMessage({ seq, ...m })
    })
  }

  async close(): Promise<void> {
    this.#closed = true
    clearTimeout(this.#idle)
    if (this.#retiring) {
      this.#retiring.worker.ref()
      await this.#retiring.exited
    }
    const worker = this.#worker
    if (!worker) return
    const exited = new Promise<void>((r) => worker.once('exit', () => r()))
    // Referenced until it exits: otherwise a process with nothing else to do would end first.
    worker.ref()
    worker.postMessage({ close: true })
    await exited
  }

  /** Lets an idle worker go: forgotten first (its exit is not a loss), then asked to close its connection. */
  #retire(worker: Worker): void {
    if (this.#worker !== worker || this.#pending.size > 0 || this.#closed) return
    this.#worker = undefined
    const exited = new Promise<void>((r) => worker.once('exit', () => r()))
    this.#retiring = { worker, exited }
    void exited.then(() => {
      if (this.#retiring?.worker === worker) this.#retiring = undefined
    })
    worker.postMessage({ close: true })
  }

  #spawn(): Worker {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3')
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { file: this.#file, driver }, resourceLimits: workerLimits() })
    worker.unref()
    worker.on('message', (m: { seq: number; inserted?: string[]; error?: { message: string; code?: string; name?: string } }) => {
      const p = this.#pending.get(m.seq)
      if (!p) return
      this.#pending.delete(m.seq)
      // Not once close() holds it: it must keep the process alive until the worker is gone, or a
      // shutdown with nothing else left ends with Node's exit 13 before close() resolves.
      if (this.#pending.size === 0 && !this.#closed) {
        worker.unref()
        this.#idle = setTimeout(() => this.#retire(worker), this.#idleExitMs).unref()
      }
      if (m.error) p.reject(Object.assign(new Error(m.error.message), { code: m.error.code, name: m.error.name ?? 'Error' }))
      else p.resolve(m.inserted ?? [])
    })
    const lost = (err: Error) => {
      if (this.#worker !== worker) return
      this.#worker = undefined
      const pending = [...this.#pending.values()]
      this.#pending.clear()
      for (const p of pending) p.reject(err)
    }
    worker.on('error', (err) => lost(Object.assign(new Error(`audit worker failed: ${err.message}`), { code: 'SQLITE_WORKER_LOST' })))
    worker.on('exit', (code) => lost(Object.assign(new Error(`audit worker exited (${code})`), { code: 'SQLITE_WORKER_LOST' })))
    this.#worker = worker
    return worker
  }
}
