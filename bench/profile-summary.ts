// Summarises V8 .cpuprofile files (CORRAL_BENCH_PROFILE=1 writes them to bench/results/prof/): self
// time per place, summed over every sample node's timeDeltas (../shared/notes/proxy-profile.md).
// A place is a package for node_modules, a file under src/, or a node: builtin, then the function.
//
//   node --import tsx bench/profile-summary.ts [files or dirs…] [--top 40] [--by file|function]
//
// Without arguments it reads every profile in bench/results/prof/. One table per profile (the
// main thread and each worker thread write their own), shares of that profile's total time.
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { attribute, cliArgs, largest } from './attribution.js'

interface CallFrame { functionName: string; url: string; lineNumber: number }
interface ProfileNode { id: number; callFrame: CallFrame }
interface Profile { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[]; startTime: number; endTime: number }

const args = process.argv.slice(2)
const cli = cliArgs(args)
const top = Number(cli.value('--top', '30'))
const by = cli.value('--by', 'function')
const inputs = args.length > 0 ? args : [resolve(import.meta.dirname, 'results/prof')]
const files = inputs.flatMap((p) => (statSync(p).isDirectory() ? readdirSync(p).filter((f) => f.endsWith('.cpuprofile')).sort().map((f) => join(p, f)) : [p]))

/** Where a frame's code lives, short: `undici`, `src/audit/writer.js`, `node:net`, or a V8 pseudo-frame. */
function place(url: string, fn: string): string {
  if (!url) return `(${fn || 'anonymous'})`.replace(/^\(\((.*)\)\)$/, '($1)')
  const nm = url.lastIndexOf('node_modules/')
  if (nm >= 0) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/')
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!
  }
  const src = url.search(/\/(src|dist)\//)
  if (src >= 0) return url.slice(src + 1).replace(/^dist\//, 'src/')
  return url.replace(/^file:\/\//, '')
}

for (const file of files) {
  const p = JSON.parse(readFileSync(file, 'utf8')) as Profile
  const byId = new Map(p.nodes.map((n) => [n.id, n]))
  const self = attribute(p.samples.keys(), (i) => {
    const n = byId.get(p.samples[i]!)
    if (!n) return undefined
    const where = place(n.callFrame.url, n.callFrame.functionName)
    return by === 'file' || where.startsWith('(') ? where : `${where} ${n.callFrame.functionName || '(anonymous)'}`
  }, (i) => p.timeDeltas[i] ?? 0)
  let total = 0
  for (const v of self.values()) total += v
  const idle = self.get('(idle)') ?? 0
  process.stdout.write(`\n${file}\n  ${(total / 1e6).toFixed(2)} s sampled, ${((100 * (total - idle)) / Math.max(1, total)).toFixed(1)} % busy\n`)
  for (const [k, v] of largest(self, top)) process.stdout.write(`  ${((100 * v) / total).toFixed(1).padStart(5)} %  ${(v / 1e3).toFixed(0).padStart(7)} ms  ${k}\n`)
}
