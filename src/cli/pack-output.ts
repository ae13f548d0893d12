// How the pack commands draw packs for people: a table for lists, `key  value` lines for one pack
// (the capabilities fragment indented below, as role show does with a role's policy), and the
// upload PATH argument turned into what the client sends.
import type { ArchiveSource, PackRecord } from '../client/index.js'
import { UsageError } from './errors.js'
import { table } from './output.js'
import { archiveSourceFor, PackPathError } from './pack-archive.js'
import { details } from './role-output.js'

export const PACK_FIELDS = [
  'id', 'name', 'display_name', 'description', 'version', 'tier', 'visibility', 'owned', 'org_id', 'category', 'suggested_packs',
  'image_origin', 'image_ref', 'image_digest', 'size_bytes', 'created_at', 'updated_at', 'capabilities',
] as const

export function packTable(rows: readonly PackRecord[]): string {
  return table(rows, [
    { header: 'name', get: (p) => p.name },
    { header: 'version', get: (p) => p.version },
    { header: 'tier', get: (p) => p.tier },
    { header: 'visibility', get: (p) => p.visibility },
    { header: 'owned', get: (p) => (p.owned ? 'yes' : '') },
    { header: 'category', get: (p) => p.category },
    { header: 'size', get: (p) => (p.size_bytes === undefined ? '' : humanBytes(p.size_bytes)) },
    { header: 'id', get: (p) => p.id },
  ])
}

export function packDetails(p: PackRecord): string {
  return details(p, PACK_FIELDS)
}

/** 1536 → "1.5 KiB": sizes for people; --json keeps the exact byte count. */
export function humanBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB']
  let v = n
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return i === 0 ? `${n} B` : `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`
}

/** PATH as an upload source; an unusable PATH is a usage error (exit 2). */
export async function archiveArg(path: string): Promise<ArchiveSource & { files?: number }> {
  try {
    return await archiveSourceFor(path)
  } catch (err) {
    if (err instanceof PackPathError) throw new UsageError(err.message)
    throw err
  }
}
