// How far a SQLite database's WAL runs ahead of its file, read from the wal-index header in the
// `-shm` file (https://www.sqlite.org/walformat.html, stable since WAL's introduction: `mxFrame`,
// the last valid frame, at byte 16; the checkpoint's `nBackfill` at byte 96; native byte order).
// The event loop's own connection never checkpoints (sqlite.ts): this read, a few bytes of a file
// every connection to the database keeps in memory, is how it knows when to ask the bulk worker to.
import { open } from 'node:fs/promises'
import { endianness } from 'node:os'

const LITTLE = endianness() === 'LE'

/** WAL frames (pages) not yet copied into the database file; undefined when there is no wal-index to read. */
export async function walBacklog(file: string): Promise<number | undefined> {
  let handle
  try {
    handle = await open(`${file}-shm`, 'r')
  } catch {
    return undefined
  }
  try {
    const header = Buffer.alloc(100)
    const { bytesRead } = await handle.read(header, 0, header.length, 0)
    if (bytesRead < header.length) return undefined
    const mxFrame = LITTLE ? header.readUInt32LE(16) : header.readUInt32BE(16)
    const nBackfill = LITTLE ? header.readUInt32LE(96) : header.readUInt32BE(96)
    return Math.max(0, mxFrame - nBackfill)
  } finally {
    await handle.close()
  }
}

/** How often the WAL is looked at (a read of the wal-index header). */
const WAL_WATCH_MS = 5_000

/** Every few seconds, `checkpoint()` when `file`'s WAL holds `pages` or more frames not yet copied back. */
export function watchWal(file: string, pages: number, checkpoint: () => Promise<void>): NodeJS.Timeout {
  let running = false
  const timer = setInterval(() => {
    if (running) return
    running = true
    void walBacklog(file)
      .then((frames) => (frames !== undefined && frames >= pages ? checkpoint() : undefined))
      // A failed read or checkpoint changes nothing: the next look tries again.
      .catch(() => {})
      .finally(() => {
        running = false
      })
  }, WAL_WATCH_MS)
  timer.unref()
  return timer
}
