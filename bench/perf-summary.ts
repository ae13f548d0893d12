// Summarises a `perf record` of a whole proxy process (CORRAL_BENCH_PERF=1 writes
// bench/results/prof/perf-<target>.data over each target's measured window; run the build with
// CORRAL_BENCH_NODE_ARGS=--perf-basic-prof so JIT frames have names). Unlike a --cpu-prof, it sees
// every thread (the event loop, the SQLite worker, V8's GC and compiler threads, libuv's pool) and
// the native and kernel work under JavaScript (TLS, syscalls, the loopback's softirq).
//
//   node --import tsx bench/perf-summary.ts bench/results/prof/perf-corral.data [requests] [--top 30] [--inclusive]
//
// Each sample is given to one owner, walking from the leaf towards the root: garbage collection
// anywhere on the stack; else the syscall it is in (socket and file writes apart); else the first
// frame that names a place (OpenSSL, a JavaScript function of src/, a package, a node: module,
// node's TLS, HTTP-parser or stream natives, libuv, SQLite, V8's JSON). V8's builtins and IC stubs
// have no place of their own, so they count for the JavaScript that called them. With `requests`
// (the window's request count: rate × seconds) each row is also given in ms per request.
import { execFileSync } from 'node:child_process'
import { attribute, cliArgs, groupBy, largest } from './attribution.js'
import { rewriteMap } from './perf-map.js'

const args = process.argv.slice(2)
const cli = cliArgs(args)
const top = Number(cli.value('--top', '30'))
const inclusive = cli.flag('--inclusive')
const [file, requestsArg] = args as [string, string | undefined]
if (!file) {
  process.stderr.write('usage: perf-summary.ts <perf.data> [requests] [--top N] [--inclusive]\n')
  process.exit(2)
}
const requests = Number(requestsArg ?? 0)

interface Sample { pid: number; tid: number; ns: number; frames: string[] }

/** Each recorded process's JIT map reduced to its latest names (bench/perf-map.ts) before perf reads it. */
function latestNamesOnly(path: string): void {
  const pids = new Set(execFileSync('perf', ['script', '-i', path, '-F', 'pid'], { maxBuffer: 1 << 28, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n').map((l) => l.trim()).filter(Boolean))
  for (const pid of pids) rewriteMap(pid)
}

function read(path: string): Sample[] {
  const text = execFileSync('perf', ['script', '-i', path, '-F', 'pid,tid,period,ip,sym,dso'], { maxBuffer: 1 << 30, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
  const out: Sample[] = []
  let cur: Sample | undefined
  for (const line of text.split('\n')) {
    if (!line.trim()) {
      if (cur) out.push(cur)
      cur = undefined
      continue
    }
    if (!line.startsWith('\t')) {
      const m = line.trim().split(/\s+/)
      const [pid, tid] = m[0]!.includes('/') ? m[0]!.split('/').map(Number) : [Number(m[0]), Number(m[1])]
      cur = { pid: pid!, tid: tid!, ns: Number(m[m.length - 1]) || 1, frames: [] }
      continue
    }
    const rest = line.trim().replace(/^\S+\s*/, '').replace(/\+0x[0-9a-f]+ \(/, ' (')
    cur?.frames.push(rest)
  }
  if (cur) out.push(cur)
  return out
}

const GC = /Heap::|Scavenge|MarkCompact|GCTracer|ConcurrentMarking|Sweeper|MinorMC|IncrementalMarking|heap::|MemoryAllocator|CppHeap/
const OPENSSL = /aesni|gcm|GCM|sha256|sha512|SHA|chacha|poly1305|EVP_|ssl3_|tls1?3?_|SSL_|ossl_|BIO_|ecp_nistz|x25519|bn_|RSA|rsa_/

function thread(s: Sample): string {
  if (s.tid === s.pid) return 'main (event loop)'
  const all = s.frames.join(' | ')
  if (all.includes('node::worker::Worker')) return 'worker thread'
  if (all.includes('uv__thread_start') || / worker \(/.test(all)) return 'libuv pool'
  if (/PlatformWorkerThread|WorkerThreadsTaskRunner|DelayedTaskScheduler/.test(all)) return 'V8 platform (GC, compiler)'
  return 'other'
}

function jsPlace(f: string): string {
  const own = /\/(?:dist|src|bench)\/(\S+?)\.[jt]s:\d+/.exec(f)
  if (own && !f.includes('node_modules')) return `src/${own[1]} ${f.split('JS:')[1]!.split(' ')[0]!.replace(/^[*^~]/, '')}`
  const pkg = /node_modules\/((@[^/]+\/)?[^/]+)/.exec(f)
  if (pkg) return pkg[1]!
  const mod = /(node:\S+?):\d+/.exec(f)
  return mod ? mod[1]! : 'js (other)'
}

function owner(frames: string[]): string {
  const all = frames.join(' | ')
  if (GC.test(all)) return 'GC'
  const sys = frames.findIndex((f) => f.startsWith('do_syscall_64'))
  if (sys > 0) {
    let name = frames[sys - 1]!.split(' ')[0]!.replace(/^(__x64_sys_|__se_sys_|__do_sys_|ksys_|__sys_|do_)/, '')
    if (name === 'write' || name === 'writev') name += /sock_write_iter|tcp_sendmsg/.test(all) ? ' (socket)' : /ext4|generic_perform_write|filemap/.test(all) ? ' (file)' : ''
    return `kernel ${name}`
  }
  if (sys === 0) return 'kernel (syscall)'
  for (const f of frames) {
    if (OPENSSL.test(f.split(' (')[0]!)) return 'OpenSSL'
    if (f.includes('JS:')) return jsPlace(f)
    if (f.includes('TLSWrap')) return 'node TLSWrap (native)'
    if (f.includes('llhttp') || f.includes('Parser::')) return 'node HTTP parser (native)'
    if (f.includes('StreamBase') || f.includes('LibuvStreamWrap')) return 'node streams (native)'
    if (f.includes('sqlite3')) return 'SQLite'
    if (f.includes('JsonParser') || f.includes('JsonStringifier')) return 'V8 JSON'
    if (f.includes('node::worker') || f.includes('MessagePort')) return 'node worker messaging'
    if (/\buv_|\buv__/.test(f)) return 'libuv'
  }
  return /\[kernel/.test(frames[0] ?? '') ? 'kernel (irq, scheduler)' : `other ${(frames[0] ?? '').slice(0, 60)}`
}

/** Inclusive owners: every src/ file on the stack, and node's TLS and HTTP parser, undici, GC. */
function owners(frames: string[]): Set<string> {
  const all = frames.join(' | ')
  const out = new Set<string>()
  if (GC.test(all)) out.add('GC')
  if (all.includes('TLSWrap')) out.add('node TLSWrap (all under it)')
  if (all.includes('Parser::')) out.add('node HTTP parser (all under it)')
  if (all.includes('node_modules/undici')) out.add('undici')
  for (const f of frames) {
    const own = /\/dist\/(\S+?)\.js:\d+/.exec(f)
    if (own) out.add(`src/${own[1]}`)
  }
  return out
}

const fmt = (ns: number, total: number): string =>
  `${((100 * ns) / total).toFixed(1).padStart(5)} %  ${(ns / 1e6).toFixed(1).padStart(8)} ms${requests ? `  ${(ns / 1e6 / requests * 1000).toFixed(1).padStart(6)} µs/req` : ''}`

latestNamesOnly(file)
const samples = read(file)
const total = samples.reduce((n, s) => n + s.ns, 0)
process.stdout.write(`${file}: ${(total / 1e6).toFixed(0)} ms of CPU sampled${requests ? `, ${(total / 1e6 / requests * 1000).toFixed(1)} µs per request` : ''}\n`)
const weight = (s: Sample): number => s.ns
for (const [name, list] of [...groupBy(samples, thread)].sort((a, b) => b[1].length - a[1].length)) {
  const t = list.reduce((n, s) => n + s.ns, 0)
  process.stdout.write(`\n== ${name}: ${fmt(t, total)}\n`)
  for (const [k, v] of largest(attribute(list, (s) => owner(s.frames), weight), top)) process.stdout.write(`  ${fmt(v, t)}  ${k}\n`)
  if (!inclusive) continue
  process.stdout.write('  -- inclusive\n')
  for (const [k, v] of largest(attribute(list, (s) => owners(s.frames), weight), top)) process.stdout.write(`  ${fmt(v, t)}  ${k}\n`)
}
