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
