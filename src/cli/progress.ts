// Progress of a long operation on stderr (pack upload bytes, snapshot, fork). On a terminal one
// status line is rewritten in place; otherwise a line is written only when the text changes (no
// cursor movement, no carriage returns), so logs and pipes stay readable. Never on stdout.
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
