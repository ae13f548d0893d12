// The provable log's appender alone, as serve runs it (on its thread, every second), against the
// store named by argv[2], until SIGTERM: bench:proxy's `corral` with the log on (proxy-log-switch.ts).
import { ProvableLog } from '../src/audit/index.js'
import { openStore } from '../src/store/index.js'

const url = process.argv[2]!
const store = await openStore(url)
const log = new ProvableLog({ store, logger: { error: (o: object, m: string) => console.error(m, o) }, thread: { url } })
log.start()
const alive = setInterval(() => {}, 1_000)
process.once('SIGTERM', () => {
  clearInterval(alive)
  void log.stop().then(() => store.close()).finally(() => process.exit(0))
})
process.stdout.write('READY\n')
