// Per-request churn of a Node proxy (bench:proxy's closed mode with CORRAL_BENCH_CHURN_DIR=<dir>, loaded
// with --import into corral and the node floor alike): async resources created, by type (timers,
// ticks, immediates, write requests, promises: async_hooks' `init`), socket timer and option
// calls, and listeners added and removed, on the main thread only. SIGUSR2 writes the running totals to
// $CORRAL_BENCH_CHURN_DIR/churn-<pid>.json; the bench takes them before and after its window.
// Counting slows the process (promise hooks most): its CPU figures are not to be read.
import { createHook } from 'node:async_hooks'
import { EventEmitter } from 'node:events'
import { writeFileSync } from 'node:fs'
import { Socket } from 'node:net'
import { join } from 'node:path'
import { isMainThread } from 'node:worker_threads'

if (isMainThread) probe()

function probe() {
  const counts = Object.create(null)
  const bump = (k) => void (counts[k] = (counts[k] ?? 0) + 1)
  // CORRAL_BENCH_CHURN_STACKS=N: one promise in N is also counted by where it was made (its first frames outside node's internals).
  const every = Number(process.env.CORRAL_BENCH_CHURN_STACKS ?? 0)
  let seen = 0
  const where = () => {
    const o = {}
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = 12
    Error.captureStackTrace(o, where)
    Error.stackTraceLimit = limit
    const frames = o.stack.split('\n').slice(1).map((l) => l.trim().replace(/^at /, '').replace(/file:\/\/\S*\/(dist|src|node_modules)\//, '$1/')).filter((l) => !l.includes('node:internal') && !l.includes('churn-probe'))
    return `promise at ${frames.slice(0, 2).join(' < ')}`
  }
  createHook({
    init: (_id, type) => {
      bump(`async ${type}`)
      if (every && type === 'PROMISE' && ++seen % every === 0) {
        const k = where()
        counts[k] = (counts[k] ?? 0) + every
      }
    },
  }).enable()

  const wrap = (proto, name, key) => {
    const orig = proto[name]
    proto[name] = function (...args) {
      bump(typeof key === 'function' ? key.apply(this, args) : key)
      return orig.apply(this, args)
    }
  }
  wrap(Socket.prototype, 'setTimeout', function (ms) { return `socket.setTimeout(${ms === 0 ? 0 : 'ms'})` })
  wrap(Socket.prototype, 'setNoDelay', 'socket.setNoDelay')
  wrap(Socket.prototype, 'setKeepAlive', 'socket.setKeepAlive')
  wrap(Socket.prototype, 'cork', 'socket.cork')
  for (const m of ['on', 'addListener', 'once', 'prependListener', 'prependOnceListener']) wrap(EventEmitter.prototype, m, function (ev) { return `listener + ${this.constructor?.name} ${String(ev)}` })
  for (const m of ['removeListener', 'off']) wrap(EventEmitter.prototype, m, function (ev) { return `listener - ${this.constructor?.name} ${String(ev)}` })
  // (`once` adds through `on`, and node's internals call either name: a listener may count under two keys.)
  for (const m of ['setTimeout', 'clearTimeout', 'setImmediate', 'queueMicrotask']) {
    const orig = globalThis[m]
    globalThis[m] = function (...args) {
      bump(`global ${m}`)
      return orig.apply(this, args)
    }
  }

  process.on('SIGUSR2', () => writeFileSync(join(process.env.CORRAL_BENCH_CHURN_DIR ?? '/tmp', `churn-${process.pid}.json`), JSON.stringify(counts)))
}
