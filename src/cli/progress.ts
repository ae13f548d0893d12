// Progress of a long operation on stderr (pack upload bytes, snapshot, fork). On a terminal one
// status line is rewritten in place; otherwise a line is written only when the text changes (no
// cursor movement, no carriage returns), so logs and pipes stay readable. Never on stdout.
import * as Flags from '@oclif/core/flags'
import { Transform } from 'node:stream'
import { colorEnabled, paint } from './output.js'

export class Progress {
  readonly #stream: NodeJS.WriteStream
  readonly #started = Date.now()
  #last = ''
  #drawn = false

  constructor(stream: NodeJS.WriteStream = process.stderr) {
    this.#stream = stream
  }

  /** Shows `text` (the elapsed time is added on a terminal). */
  update(text: string): void {
    if (this.#stream.isTTY) {
      const line = `${text} (${Math.floor((Date.now() - this.#started) / 1000)}s)`
      this.#stream.write(`\r\u001B[2K${colorEnabled(this.#stream) ? paint('cyan', line, this.#stream) : line}`)
      this.#drawn = true
      return
    }
    if (text === this.#last) return
    this.#last = text
    this.#stream.write(`${text}\n`)
  }

  /** Removes the status line (on a terminal) before an error is printed. */
  clear(): void {
    if (this.#stream.isTTY && this.#drawn) this.#stream.write('\r\u001B[2K')
    this.#drawn = false
  }

  /** Ends the status line with a final message. */
  done(text: string): void {
    if (this.#stream.isTTY && this.#drawn) this.#stream.write('\r\u001B[2K')
    this.#stream.write(`${text}\n`)
  }
}

/** 1234567 → "1.2 MB". */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`
  const units = ['kB', 'MB', 'GB']
  let v = n / 1024
  let i = 0
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024
    i++
  }
  return `${v.toFixed(1)} ${units[i]}`
}

/** `--quiet`: no progress on stderr (with --json there is none either). */
export const quietFlag = Flags.boolean({ char: 'q', summary: 'No progress on stderr (results and errors still print).' })

/**
 * Counts bytes going through a stream and shows them on stderr: on a terminal a status line
 * redrawn at most every 100 ms (with a bar when the total is known), off a terminal a plain line
 * at most every LINE_EVERY_MS (so a short transfer, or one refused at once, prints none and an
 * error stays the only line). `enabled: false` (--json, --quiet) shows nothing.
 */
/** Off a terminal, the least time between two progress lines. */
export const LINE_EVERY_MS = 2000

export class ByteProgress {
  readonly #progress: Progress
  readonly #label: string
  #total: number | undefined
  readonly #enabled: boolean
  readonly #tty: boolean
  readonly #now: () => number
  #seen = 0
  #shownAt: number

  constructor(label: string, total: number | undefined, opts: { enabled: boolean; stream?: NodeJS.WriteStream; now?: () => number }) {
    this.#total = total && total > 0 ? total : undefined
    this.#now = opts.now ?? Date.now
    const stream = opts.stream ?? process.stderr
    this.#progress = new Progress(stream)
    this.#label = label
    this.#enabled = opts.enabled
    this.#tty = Boolean(stream.isTTY)
    // Off a terminal the first line waits a full interval: a short transfer prints none.
    this.#shownAt = this.#tty ? 0 : this.#now()
  }

  /** The total, once known (an upload learns its archive's size when it starts). */
  total(n: number): void {
    this.#total = n > 0 ? n : undefined
  }

  add(n: number): void {
    this.#seen += n
    if (!this.#enabled) return
    const now = this.#now()
    if (now - this.#shownAt < (this.#tty ? 100 : LINE_EVERY_MS) && !(this.#tty && this.#seen === this.#total)) return
    this.#shownAt = now
    this.#progress.update(this.#text(this.#tty))
  }

  /** A pass-through that counts what flows (for a request body or a download). */
  counter(): Transform {
    return new Transform({ transform: (chunk: Buffer, _enc, done) => {
      this.add(chunk.length)
      done(null, chunk)
    } })
  }

  done(text: string): void {
    if (this.#enabled) this.#progress.done(text)
  }

  clear(): void {
    if (this.#enabled) this.#progress.clear()
  }

  #text(bar: boolean): string {
    if (!this.#total) return `${this.#label}: ${bytes(this.#seen)}`
    // A body may carry a little more than the payload it was sized by (multipart framing).
    const seen = Math.min(this.#seen, this.#total)
    const pct = Math.floor((seen / this.#total) * 100)
    const width = 20
    const filled = Math.round((pct / 100) * width)
    const drawn = bar ? ` [${'#'.repeat(filled)}${'.'.repeat(width - filled)}]` : ''
    return `${this.#label}:${drawn} ${bytes(seen)} of ${bytes(this.#total)} (${pct}%)`
  }
}

/** Bytes sent on stderr while `send` runs (nothing when not `shown`); the line is cleared on failure. */
export async function withUploadProgress<T>(shown: boolean, send: (progress: { start(n: number): void; sent(n: number): void }) => Promise<T>): Promise<T> {
  const bar = new ByteProgress('Uploading', undefined, { enabled: shown })
  try {
    const result = await send({ start: (n) => bar.total(n), sent: (n) => bar.add(n) })
    bar.done('Uploaded; the server accepted the pack.')
    return result
  } catch (error) {
    bar.clear()
    throw error
  }
}
