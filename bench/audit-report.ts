// What every audit benchmark does with its figures: one JSON file under bench/results/ with the
// machine and its load average beside them (the machine is shared: a figure without its load is
// not a figure), then a table on stdout and the load average again at the end.
import { mkdirSync, writeFileSync } from 'node:fs'
import { cpus, loadavg } from 'node:os'
import { resolve } from 'node:path'

export const loadLine = (): string => `load average ${loadavg().map((l) => l.toFixed(1)).join(' ')}`

/** Writes bench/results/<name>.json ({ at, node, cpus, loadavg, …doc }), prints `rows` as a table and the load; returns the file. */
export function report(name: string, doc: Record<string, unknown>, rows: ReadonlyArray<Record<string, unknown>>, notes: readonly string[] = []): string {
  const out = { at: new Date().toISOString(), node: process.version, cpus: cpus().length, loadavg: loadavg(), ...doc }
  const dir = resolve(import.meta.dirname, 'results')
  mkdirSync(dir, { recursive: true })
  const file = resolve(dir, `${name}.json`)
  writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`)
  console.table(rows)
  for (const n of notes) console.log(n)
  console.log(`machine: ${cpus().length} cpus, ${loadLine()}; wrote ${file}`)
  return file
}
