// Kernel work per request (bench:proxy's closed mode, CORRAL_BENCH_SYSCALLS=1): over a target's
// measured window, `perf stat` counts every syscall of every thread (syscalls:sys_enter_*, one count
// per thread, the event loop apart from the rest); over a short second window, `perf trace`
// records the event loop's reads and writes with their file descriptors, and each descriptor is
// classed by what it was at the end (the client's leg: a connection accepted on one of the
// target's listening ports; the upstream's: a connection to the upstream's port; anything else by
// its /proc link), so the TLS records written and the reads per request on each leg can be told
// apart. Counts per answered request do not depend on how fast the machine runs, only on how many
// requests each wake-up finds (the throughput), which the result reports beside them.
import { spawn } from 'node:child_process'
import { readdirSync, readFileSync, readlinkSync } from 'node:fs'

const round = (n: number, d = 3): number => Math.round(n * 10 ** d) / 10 ** d

type Counts = Record<string, number>

/** `perf stat` of every syscall tracepoint (and page faults, context switches, migrations), per thread, over these processes until stop(). */
export function syscallCount(pids: readonly number[]): { stop(requests: number): Promise<{ main: Counts; other: Counts }> } {
  const child = spawn('perf', ['stat', '--per-thread', '-x', ',', '-e', 'syscalls:sys_enter_*,page-faults,context-switches,cpu-migrations', '-p', pids.join(',')], { stdio: ['ignore', 'ignore', 'pipe'] })
  let text = ''
  child.stderr.on('data', (c: Buffer) => (text += c.toString()))
  return {
    stop: (requests) => new Promise((resolve) => {
      child.once('exit', () => {
        const main: Counts = {}
        const other: Counts = {}
        // `comm-tid,count,unit,event,...` per thread and event.
        for (const line of text.split('\n')) {
          const m = /^(.+)-(\d+),(\d+),[^,]*,(?:syscalls:sys_enter_)?([\w-]+),/.exec(line)
          if (!m || m[3] === '0') continue
          const into = pids.includes(Number(m[2])) ? main : other
          into[m[4]!] = (into[m[4]!] ?? 0) + Number(m[3])
        }
        resolve({ main: perRequest(main, requests), other: perRequest(other, requests) })
      })
      child.kill('SIGINT')
    }),
  }
}

function perRequest(c: Counts, requests: number): Counts {
  const n = Math.max(1, requests)
  return Object.fromEntries(Object.entries(c).map(([k, v]) => [k, round(v / n)] as const).filter(([, v]) => v >= 0.005).sort((a, b) => b[1] - a[1]))
}

/** inode → [local port, remote port, state] of every TCP socket of the process's namespace. */
function tcpSockets(pid: number): Map<string, [number, number, string]> {
  const out = new Map<string, [number, number, string]>()
  for (const f of ['tcp', 'tcp6']) {
    let text = ''
    try {
      text = readFileSync(`/proc/${pid}/net/${f}`, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/)
      if (cols.length < 10) continue
      out.set(cols[9]!, [parseInt(cols[1]!.split(':')[1]!, 16), parseInt(cols[2]!.split(':')[1]!, 16), cols[3]!])
    }
  }
  return out
}

/** Each open descriptor of the process, classed: `client`, `upstream`, `tcp-other`, `file`, `pipe`, `eventfd`, … */
function fdClasses(pid: number, upPort: number): Map<number, string> {
  const tcp = tcpSockets(pid)
  const links = new Map<number, string>()
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      links.set(Number(fd), readlinkSync(`/proc/${pid}/fd/${fd}`))
    } catch {
      // closed meanwhile
    }
  }
  const listening = new Set<number>()
  for (const l of links.values()) {
    const s = /^socket:\[(\d+)\]$/.exec(l) && tcp.get(/^socket:\[(\d+)\]$/.exec(l)![1]!)
    if (s && s[2] === '0A') listening.add(s[0])
  }
  const out = new Map<number, string>()
  for (const [fd, l] of links) {
    const sock = /^socket:\[(\d+)\]$/.exec(l)
    const s = sock ? tcp.get(sock[1]!) : undefined
    if (s) out.set(fd, s[2] === '0A' ? 'listen' : listening.has(s[0]) ? 'client' : s[1] === upPort ? 'upstream' : 'tcp-other')
    else if (sock) out.set(fd, 'socket-other')
    else if (l.startsWith('pipe:')) out.set(fd, 'pipe')
    else if (l.startsWith('anon_inode:')) out.set(fd, l.slice('anon_inode:'.length).replace(/[[\]]/g, ''))
    else out.set(fd, 'file')
  }
  return out
}

export interface LegCounts {
  /** calls per request by `syscall fd-class` (e.g. `write client`, `read upstream`) */
  calls: Counts
  /** bytes per call by `syscall fd-class` (what a write carried: one TLS record or several) */
  bytes_per_call: Counts
  /** calls that moved no byte (EAGAIN, 0) per request, by `syscall fd-class` */
  empty: Counts
  /** the first lines of the trace of each `syscall fd-class` and of those that moved no byte, the descriptors named by class */
  sample: string[]
}

/**
 * `perf trace` of the event loop's reads and writes until stop(): calls per request on each leg.
 * Only the process's first thread (the event loop), where every socket is read and written.
 */
export function legTrace(pid: number, upPort: number): { stop(requests: number): Promise<LegCounts> } {
  const calls = 'read,write,writev,readv,recvfrom,sendto,recvmsg,sendmsg'
  const child = spawn('perf', ['trace', '--no-inherit', '-e', calls, '-t', String(pid)], { stdio: ['ignore', 'pipe', 'pipe'] })
  let text = ''
  child.stdout.on('data', (c: Buffer) => (text += c.toString()))
  child.stderr.on('data', (c: Buffer) => (text += c.toString()))
  return {
    stop: (requests) => new Promise((resolve) => {
      const classes = fdClasses(pid, upPort)
      child.once('exit', () => {
        const n: Counts = {}
        const bytes: Counts = {}
        const empty: Counts = {}
        const sample: string[] = []
        for (const line of text.split('\n')) {
          const m = /\s(\w+)\(fd: (\d+)[^)]*\)\s+=\s+(-?\d+|-1 \w+|\w+)/.exec(line)
          if (!m) continue
          const key = `${m[1]} ${classes.get(Number(m[2])) ?? 'closed'}`
          const ret = Number(m[3])
          const moved = Number.isFinite(ret) && ret > 0
          if ((moved ? n[key] ?? 0 : empty[key] ?? 0) < 3) sample.push(line.trim().replace(/\(fd: \d+/, `(fd: ${m[2]} ${classes.get(Number(m[2])) ?? 'closed'}`).replace(/buf: 0x[0-9a-f]+, |vec: 0x[0-9a-f]+, /, ''))
          n[key] = (n[key] ?? 0) + 1
          if (moved) bytes[key] = (bytes[key] ?? 0) + ret
          else empty[key] = (empty[key] ?? 0) + 1
        }
        resolve({
          calls: perRequest(n, requests),
          bytes_per_call: Object.fromEntries(Object.entries(bytes).map(([k, v]) => [k, round(v / n[k]!, 0)])),
          empty: perRequest(empty, requests),
          sample,
        })
      })
      child.kill('SIGINT')
    }),
  }
}
