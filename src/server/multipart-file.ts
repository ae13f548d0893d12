// File parts of a multipart body that end for sure. @fastify/multipart does not fail a file part
// when the request body ends in the middle of it: depending on timing the part's stream errors,
// closes without ending, or simply never ends, and a reader piping it somewhere waits forever.
// A route reads the part through `feedFilePart` and keeps iterating the parts while the bytes are
// written out; once the iterator is over (body read, cut off, or client gone) it calls
// `bodyOver()`, which fails every part that has not ended by then. Used by task uploads
// (routes/task-input.ts) and pack uploads (routes/packs.ts).
import type { Multipart } from '@fastify/multipart'
import { PassThrough, type Readable } from 'node:stream'

export interface FileFeed {
  /**
   * The part's bytes. It errors with the parser's error, or with the route's `cutShort()` when
   * the part stops before its end (truncated body, client disconnect).
   */
  readonly stream: PassThrough
  /** The parts iterator is over: a part that has not ended by now never will. */
  bodyOver(): void
  /** Stops forwarding (the write was refused) and lets the part's remaining bytes drain to nowhere. */
  drop(): void
}

export function feedFilePart(file: Readable, cutShort: () => Error): FileFeed {
  // Fed through our own stream: a refusal destroys that one, and the part stays drainable.
  // `pipe` forwards neither errors nor an early close; both must fail the reader.
  const feed = new PassThrough()
  // The reader's pipeline reports feed errors; this keeps a late one (after it settled) quiet.
  feed.on('error', () => {})
  // Busboy emits "Part terminated early" on the part when the body ends inside it: that is the
  // route's truncation error too, not a parser fault.
  file.on('error', (err: Error) => feed.destroy(/terminated early/.test(err.message) ? cutShort() : err))
  file.on('close', () => {
    if (!partEnded(file)) feed.destroy(cutShort())
  })
  // The parser may have failed the part (body cut short) before the route got to it.
  if (file.destroyed && !partEnded(file)) feed.destroy(file.errored ?? cutShort())
  else file.pipe(feed)
  return {
    stream: feed,
    bodyOver() {
      if (!partEnded(file)) feed.destroy(cutShort())
    },
    drop() {
      file.unpipe(feed)
      discard(file)
    },
  }
}

/** Whether the stream has received all its data (its reader may not have read everything yet). */
export function partEnded(stream: Readable): boolean {
  if (stream.readableEnded) return true
  // The only way to see that a Readable's source pushed its end before the reader got there; a
  // stream destroyed before emitting 'end' (a failed part) did not end, whatever it pushed.
  return !stream.destroyed && (stream as unknown as { _readableState?: { ended?: boolean } })._readableState?.ended === true
}

/** Lets a part's bytes flow to nowhere, so the parser can go on to the end of the body. */
export function discard(stream: Readable): void {
  stream.on('error', () => {})
  stream.resume()
}

/**
 * Whether an error the parts iterator raised is a malformed body rather than a server fault:
 * @fastify/multipart's own errors (FST_*) and busboy's (plain Errors naming the multipart data,
 * the form, or a part header).
 */
export function isMalformedBody(err: unknown): boolean {
  const { code, message } = err as { code?: string; message?: string }
  return Boolean(code?.startsWith('FST_') || (message && /multipart|unexpected end of form|malformed part header/i.test(message)))
}

/**
 * Reads the remaining parts to the end of the body, dropping them (the iterator's own errors too),
 * so an early answer (413) does not leave the client's upload unread. `pending` is the step the
 * route was waiting for when it stopped: it is taken first, or its part would never be read.
 */
export async function dropRest(parts: AsyncIterator<Multipart>, pending?: Promise<IteratorResult<Multipart>>): Promise<void> {
  try {
    for (let step = await (pending ?? parts.next()); !step.done; step = await parts.next()) if (step.value.type === 'file') discard(step.value.file)
  } catch {
    // The body ended badly or the client went: nothing is left to drop.
  }
}
