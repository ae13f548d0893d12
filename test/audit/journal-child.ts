// A writer process for the kill -9 test (journal.test.ts): opens the store and a journaled writer,
// emits events as fast as they are acknowledged and prints each acknowledged id on its own line,
// until it is killed. argv: <store url> <schema|-> <journal dir> <org> <mode: live|hung> <durability: process|host>
import { openAuditWriter } from '../../src/audit/index.js'
import { openStore, type Store } from '../../src/store/index.js'
import { decision } from './fixtures.js'

const [url, schema, journalDir, org, mode, durability] = process.argv.slice(2)
const real = await openStore(url, schema === '-' ? {} : { schema, poolSize: 2 })
// hung: the database never answers, so every acknowledgement comes from the journal alone.
const store: Store = mode === 'hung' ? { ...real, audit: { ...real.audit, insertEncodedReturningIds: () => new Promise(() => {}) } } : real
const writer = await openAuditWriter(store, { journalDir, journalDurability: durability === 'host' ? 'host' : 'process', logger: { error: () => {} } })
process.stdout.write('ready\n')
let i = 0
// Several emits in flight at once, like concurrent requests: group commit puts them in one fsync.
const loop = async () => {
  for (;;) {
    const e = await writer.emit(decision(org, { latency_ms: i++, detail: { n: i, pad: 'p'.repeat(i % 300) } }))
    process.stdout.write(`${e.id}\n`)
  }
}
await Promise.all([loop(), loop(), loop(), loop()])
