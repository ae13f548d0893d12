// Pack ingest benchmark (not a test). Measures the content store's upload path end to end —
// gunzip + safe tar extraction, pack.yaml parse, permission normalisation, the deterministic tar
// digest, atomic placement — for two shapes of pack:
// - many small files (2000 files of 4 KiB, ~8 MiB)
// - a few large files (4 files of 16 MiB, 64 MiB, incompressible)
// Reported: median ms per ingest and MiB/s of extracted bytes, over 5 runs each (fresh store per
// run, so no digest reuse). No targets are asserted; compare runs on the same machine.
// Run: `npm run bench:packs` → prints a table, writes bench/results/packs.json.
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gzipSync } from 'node:zlib'
import tarStream from 'tar-stream'
import { PackContent } from '../src/packs/content.js'

const root = fileURLToPath(new URL('../', import.meta.url))
const RUNS = 5

async function tarGz(files: { name: string; body: Buffer }[]): Promise<Buffer> {
  const pack = tarStream.pack()
  const chunks: Buffer[] = []
  const done = (async () => {
    for await (const c of pack) chunks.push(c as Buffer)
  })()
  for (const f of files) await new Promise<void>((resolve, reject) => pack.entry({ name: f.name, mode: 0o644 }, f.body, (err) => (err ? reject(err) : resolve())))
  pack.finalize()
  await done
  return gzipSync(Buffer.concat(chunks), { level: 1 })
}

const manifest = { name: 'pack.yaml', body: Buffer.from('name: bench\nversion: "1"\n') }
const shapes = {
  'many small files': () => tarGz([manifest, ...Array.from({ length: 2000 }, (_, i) => ({ name: `d${i % 40}/f${i}.txt`, body: randomBytes(4096) }))]),
  'few large files': () => tarGz([manifest, ...Array.from({ length: 4 }, (_, i) => ({ name: `blob${i}.bin`, body: randomBytes(16 * 1024 * 1024) }))]),
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
const results: Record<string, { archive_mib: number; extracted_mib: number; median_ms: number; mib_per_s: number }> = {}
for (const [label, make] of Object.entries(shapes)) {
  const archive = await make()
  const times: number[] = []
  let bytes = 0
  for (let i = 0; i < RUNS; i++) {
    const dir = mkdtempSync(join(tmpdir(), 'corral-bench-packs-'))
    const content = new PackContent(join(dir, 'packs'), { maxCompressedBytes: 1024 ** 3, maxUncompressedBytes: 1024 ** 3, maxEntries: 100_000 })
    const start = process.hrtime.bigint()
    const out = await content.ingest(archive)
    times.push(Number(process.hrtime.bigint() - start) / 1e6)
    bytes = out.sizeBytes
    out.release()
    rmSync(dir, { recursive: true, force: true })
  }
  const ms = median(times)
  results[label] = { archive_mib: archive.length / 1024 ** 2, extracted_mib: bytes / 1024 ** 2, median_ms: ms, mib_per_s: bytes / 1024 ** 2 / (ms / 1000) }
}

console.log('shape                 archive MiB  extracted MiB  median ms   MiB/s')
for (const [label, r] of Object.entries(results)) {
  console.log(`${label.padEnd(20)} ${r.archive_mib.toFixed(1).padStart(12)} ${r.extracted_mib.toFixed(1).padStart(14)} ${r.median_ms.toFixed(0).padStart(10)} ${r.mib_per_s.toFixed(1).padStart(7)}`)
}
mkdirSync(join(root, 'bench/results'), { recursive: true })
writeFileSync(join(root, 'bench/results/packs.json'), `${JSON.stringify({ at: new Date().toISOString(), runs: RUNS, results }, null, 2)}\n`)
