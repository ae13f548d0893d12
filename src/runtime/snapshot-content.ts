// Reading what a snapshot holds without unpacking it (GET /v1/workspaces/{id}/snapshot/content):
// one file's bytes, or a tar of a directory's subtree (or of all of /data), cut out of the
// snapshot's uncompressed tar by byte ranges (the entries' own header and body records, copied
// verbatim, then the end-of-archive marker). Nothing is extracted, so a path or a link in the
// archive can never reach the host's filesystem. Symbolic and hard links are refused as files
// (their target is named), a path is matched exactly against the archive's (no `..`, no
// normalisation beyond `./` and trailing slashes).
import { createReadStream } from 'node:fs'
import { PassThrough, type Readable } from 'node:stream'
import { RuntimeError } from './errors.js'
import type { SnapshotContent } from './runtime.js'
import { entryOf, walkTar, type TarRecord } from './snapshot-store.js'

/** The largest answer: a file, or the sum of a subtree's records. */
export const SNAPSHOT_CONTENT_MAX_BYTES = 512 * 1024 * 1024
const END_OF_ARCHIVE = Buffer.alloc(1024)

/** A relative path inside /data, or a validation RuntimeError (absolute, `..`, `.`, empty segments, NUL). */
export function snapshotPath(raw: string): string {
  const path = raw.replace(/^\.\//, '').replace(/\/+$/, '')
  if (path === '' || path === '.') return ''
  const bad = raw.includes('\0') || raw.startsWith('/') || path.split('/').some((seg) => seg === '' || seg === '.' || seg === '..')
  if (bad) throw new RuntimeError('validation_error', `path ${JSON.stringify(raw)} is not a relative path inside /data (no leading /, no . or .. segments)`, { fields: { path: 'must be a relative path inside /data' } })
  return path
}

/**
 * Reads `raw` (checked by snapshotPath) from the tar at `file`. `release` runs once the
 * stream is done or destroyed (the registry store's scratch copy), and also when this throws.
 */
export function tarContent(file: string, raw: string, release: () => void = () => {}): SnapshotContent {
  try {
    const path = snapshotPath(raw)
    if (path === '') {
      const size = tarEnd(file)
      return { kind: 'tar', size: size + END_OF_ARCHIVE.length, stream: withRelease(ranges(file, [[0, size]]), release) }
    }
    const found = findEntry(file, path)
    if (found.type === 'Directory') return subtree(file, path, found, release)
    if (found.type === 'SymbolicLink' || found.type === 'Link') {
      const what = found.type === 'Link' ? 'a hard link' : 'a symbolic link'
      throw new RuntimeError('validation_error', `${path} is ${what} to ${found.linkpath ?? '?'} in the snapshot; read its target instead`, { fields: { path: `is ${what}` } })
    }
    if (found.type !== 'File' && found.type !== 'OldFile' && found.type !== 'ContiguousFile') {
      throw new RuntimeError('validation_error', `${path} is not a regular file in the snapshot (${found.type})`, { fields: { path: 'is not a regular file' } })
    }
    tooLarge(path, found.size)
    const stream = found.size === 0 ? emptyStream() : createReadStream(file, { start: found.bodyAt, end: found.bodyAt + found.size - 1 })
    return { kind: 'file', entry: entryOf(found), size: found.size, stream: withRelease(stream, release) }
  } catch (err) {
    release()
    throw err
  }
}

function findEntry(file: string, path: string): TarRecord {
  let found: TarRecord | undefined
  let under = false
  walkTar(file, (r) => {
    if (r.path === path) found = r
    else if (r.path.startsWith(`${path}/`)) under = true
    return found === undefined
  })
  // A tar may hold a directory's files without the directory's own entry.
  if (!found && under) return { path, type: 'Directory', size: 0, mode: 0o755, mtime: 0, start: 0, bodyAt: 0, end: 0 }
  if (!found) throw new RuntimeError('not_found', `${path} is not in the snapshot`)
  return found
}

function subtree(file: string, path: string, dir: TarRecord, release: () => void): SnapshotContent {
  const spans: Array<[number, number]> = []
  let size = 0
  walkTar(file, (r) => {
    if (r.path !== path && !r.path.startsWith(`${path}/`)) return
    const last = spans.at(-1)
    if (last && last[1] === r.start) last[1] = r.end
    else spans.push([r.start, r.end])
    size += r.end - r.start
    tooLarge(path, size)
  })
  return { kind: 'tar', entry: entryOf(dir), size: size + END_OF_ARCHIVE.length, stream: withRelease(ranges(file, spans), release) }
}

/** The offset where the archive's entries end (its end-of-archive marker). */
function tarEnd(file: string): number {
  let end = 0
  walkTar(file, (r) => {
    end = r.end
  })
  tooLarge('the snapshot', end)
  return end
}

function tooLarge(what: string, size: number): void {
  if (size > SNAPSHOT_CONTENT_MAX_BYTES) {
    throw new RuntimeError('validation_error', `${what} is ${size} bytes, over the ${SNAPSHOT_CONTENT_MAX_BYTES}-byte limit of one read; download a smaller path`, { fields: { path: 'too large to read at once' } })
  }
}

/** The byte ranges of `file` one after another, then the end-of-archive marker. */
function ranges(file: string, spans: ReadonlyArray<readonly [number, number]>): Readable {
  const out = new PassThrough()
  void (async () => {
    try {
      for (const [start, end] of spans) {
        if (end <= start) continue
        for await (const chunk of createReadStream(file, { start, end: end - 1 })) {
          if (!out.write(chunk)) await new Promise((r) => out.once('drain', r))
          if (out.destroyed) return
        }
      }
      out.end(END_OF_ARCHIVE)
    } catch (err) {
      out.destroy(err as Error)
    }
  })()
  return out
}

function emptyStream(): Readable {
  const s = new PassThrough()
  s.end()
  return s
}

function withRelease(stream: Readable, release: () => void): Readable {
  let done = false
  const once = (): void => {
    if (done) return
    done = true
    release()
  }
  stream.once('close', once)
  stream.once('end', once)
  stream.once('error', once)
  return stream
}
