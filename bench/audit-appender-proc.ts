// The provable log's appender alone, as serve runs it (on its thread, every second), against the
// store named by argv[2], until SIGTERM: bench:proxy's `corral` with the log on (proxy-log-switch.ts).
// With a trace file as argv[3], every 250 ms one JSON line: the time, the rows queued for the log
// and the process's CPU (every thread: the appender's is among them) since the start, so a latency
// window can be laid over what the appender did in it (bench/appender-trace.ts). argv[4]: the
// checkout whose code runs (a baseline build's appender, traced the same way): its build (dist/)
// when there is one, as serve runs it (the worker's .js entry, no TypeScript compiled at its
// start), else its sources.
import { appendFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'

const url = process.argv[2]!
const trace = process.argv[3] || undefined
const checkout = process.argv[4] || join(import.meta.dirname, '..')
const built = existsSync(join(checkout, 'dist/audit/index.js'))
const entry = (dir: string) => pathToFileURL(join(checkout, built ? `dist/${dir}/index.js` : `src/${dir}/index.ts`)).href
const { ProvableLog } = await import(entry('audit')) as typeof import('../src/audit/index.js')
const { openStore } = await import(entry('store')) as typeof import('../src/store/index.js')
const store = await openStore(url)
const log = new ProvableLog({ store, logger: { error: (o: object, m: string) => console.error(m, o) }, thread: { url } })
log.start()
const alive = setInterval(() => {}, 1_000)
const sample = trace
  ? setInterval(() => {
      void store.auditLog.queueExtent().then((e) => {
        const cpu = process.cpuUsage()
        appendFileSync(trace, `${JSON.stringify({ t: Date.now(), queued: e ? e.tail - e.head + 1 : 0, cpu_ms: Math.round((cpu.user + cpu.system) / 1000) })}\n`)
      })
    }, 250)
  : undefined
process.once('SIGTERM', () => {
  clearInterval(alive)
  clearInterval(sample)
  void log.stop().then(() => store.close()).finally(() => process.exit(0))
})
process.stdout.write('READY\n')
