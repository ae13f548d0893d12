// A process that closes the SQLite bulk insert worker while a batch is still in flight and has
// nothing else to do (sqlite-bulk-worker.test.ts): it must print the batch's count and exit 0.
// argv: <sqlite file> <rows>
import BetterSqlite3 from 'better-sqlite3'
import { SqliteBulkWorker } from '../../src/store/dialects/sqlite-bulk-worker.js'

const [file, n] = process.argv.slice(2)
const db = new BetterSqlite3(file)
db.pragma('journal_mode = WAL')
db.exec('CREATE TABLE t (id TEXT PRIMARY KEY, pad TEXT)')
db.close()
const worker = new SqliteBulkWorker(file)
const rows = Array.from({ length: Number(n) }, (_, i) => [`row-${i}`, 'p'.repeat(200)])
const batch = worker.run({ text: 'INSERT OR IGNORE INTO t (id, pad) VALUES (?, ?)', strict: 'INSERT INTO t (id, pad) VALUES (?, ?) ON CONFLICT (id) DO NOTHING' }, rows, 0)
await worker.close()
process.stdout.write(`closed ${(await batch).length}\n`)
