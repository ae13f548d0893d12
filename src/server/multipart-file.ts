// Reading a multipart body part by part, for both uploads (task files, server/task-input.ts; pack
// archives, routes/packs.ts): `readParts` is the one read loop, `feedFilePart` the file parts
// that end for sure. @fastify/multipart does not fail a file part when the request body ends in
// the middle of it: depending on timing the part's stream errors, closes without ending, or
// simply never ends, and a reader piping it somewhere waits forever. So a file part is read
// through `feedFilePart` while the loop keeps iterating the parts; once the iterator is over
// (body read, cut off, or client gone) `bodyOver()` fails every part that has not ended by then.
import type { Multipart, MultipartFile, MultipartValue } from '@fastify/multipart'
import type { FastifyRequest } from 'fastify'
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

/** What a route does with one file part it accepts. */
export interface FileSink {
  /** Consumes the part's bytes (they end for sure, see FileFeed); a rejection refuses the body. */
  consume(stream: PassThrough): Promise<void>
  /** The error for a part that stops before its end (truncated body, client disconnect). */
  cutShort(): Error
  /** The error for a part over the parser's `fileSize` limit. */
  tooLarge(): Error
  /** Refuse as soon as the parser reaches the `fileSize` limit, not only once the part is consumed. */
  stopAtLimit?: boolean
}

export interface PartReader {
  limits: { files?: number; fields?: number; fieldSize?: number; fileSize?: number; parts?: number }
  /** A file part: the sink its bytes go to; throwing refuses the body (the part is dropped). */
  file(part: MultipartFile): FileSink
  /** A field part; throwing refuses the body. */
  field(part: MultipartValue): void
}

/** An upload's own limit error (413) or the parser's file-size error. */
export function isTooLarge(err: unknown): boolean {
  const code = (err as { code?: string }).code
  return code === 'payload_too_large' || code === 'FST_REQ_FILE_TOO_LARGE'
}

/**
 * Reads every part of a multipart body; resolves with the first failure (undefined when every
 * part was accepted and consumed). It never throws: the caller maps the failure to its answer and
 * undoes what the sinks wrote.
 *
 * The parts are read while file parts are being consumed, so the end of the body is seen even
 * when a file part never ends: a body cut off mid-part (or a client that disconnects) fails the
 * part instead of stalling it. After a refusal the rest of the body is still read and dropped, so
 * the client — still sending — gets the envelope instead of a reset connection. An over-limit file
 * is answered (413) as soon as it passes the limit, and the rest of the body is dropped after the
 * answer: closing the connection instead would reset it under a client still sending, which can
 * lose the answer.
 */
export async function readParts(request: FastifyRequest, reader: PartReader): Promise<unknown> {
  const feeds: FileFeed[] = []
  const consumed: Promise<void>[] = []
  let failure: unknown
  let stop!: (err: unknown) => void
  const stopped = new Promise<never>((_resolve, reject) => (stop = reject))
  stopped.catch(() => {})
  const fail = (err: unknown) => {
    failure ??= err
    if (isTooLarge(err)) stop(err)
  }

  const parts = request.parts({ limits: reader.limits })[Symbol.asyncIterator]()
  // The step being waited for when an over-limit file stops the loop: the drain takes it first.
  let next: Promise<IteratorResult<Multipart>> | undefined
  try {
    for (;;) {
      next = parts.next()
      const step = await Promise.race([next, stopped])
      next = undefined
      if (step.done) break
      const part = step.value
      if (failure !== undefined) {
        if (part.type === 'file') discard(part.file)
        continue
      }
      try {
        if (part.type === 'file') {
          const sink = reader.file(part)
          const file = part.file
          // Fed through the helper's own stream: a body cut short or a client gone fails the sink.
          const feed = feedFilePart(file, () => sink.cutShort())
          // The parser drops the rest of an over-limit file but still reads it: stop at once instead.
          if (sink.stopAtLimit) file.once('limit', () => fail(sink.tooLarge()))
          feeds.push(feed)
          consumed.push(
            sink.consume(feed.stream).then(
              () => {
                if (file.truncated) fail(sink.tooLarge())
              },
              (err: unknown) => {
                fail(err)
                // The part's remaining bytes flow to nowhere, so the body can be read to its end.
                feed.drop()
              },
            ),
          )
        } else {
          reader.field(part)
        }
      } catch (err) {
        fail(err)
        if (part.type === 'file') discard(part.file)
      }
    }
  } catch (err) {
    fail(err)
    // Stopped at an over-limit file: the parts still coming are dropped after the answer.
    if (isTooLarge(err)) void dropRest(parts, next)
  }
  // The body has been read to its end (or we stopped reading): a file part that has not ended by
  // now never will.
  for (const feed of feeds) feed.bodyOver()
  await Promise.all(consumed)
  return failure
}
