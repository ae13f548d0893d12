// Output helpers shared by every command: stderr diagnostics, colour (NO_COLOR honoured) and
// plain-text tables. stdout carries data only; everything else goes to stderr.

export function colorEnabled(stream: NodeJS.WriteStream = process.stderr): boolean {
  if (process.env.NO_COLOR !== undefined && process.env.NO_COLOR !== '') return false
  if (process.env.FORCE_COLOR !== undefined && process.env.FORCE_COLOR !== '0') return true
  return Boolean(stream.isTTY)
}

const codes = { red: 31, green: 32, yellow: 33, blue: 34, magenta: 35, cyan: 36, gray: 90, bold: 1, dim: 2 } as const
export type Color = keyof typeof codes

export function paint(color: Color, text: string, stream: NodeJS.WriteStream = process.stdout): string {
  return colorEnabled(stream) ? `\u001B[${codes[color]}m${text}\u001B[0m` : text
}

/**
 * One JSON object on one line of stdout: what the long-running commands (serve, dev, proxy) print
 * under --json instead of their human lines (a supervisor reads it line by line).
 */
export function jsonLine(value: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(value)}\n`)
}

/** Writes one diagnostic line to stderr (never silenced by --json, unlike oclif's logToStderr). */
export function diag(line: string): void {
  process.stderr.write(line.endsWith('\n') ? line : `${line}\n`)
}

export interface Column<R> {
  header: string
  get: (row: R) => unknown
}

function cell(value: unknown): string {
  if (value === undefined || value === null) return ''
  if (typeof value === 'object') return JSON.stringify(value)
  return String(value)
}

/** Renders rows as an aligned text table with a header line. */
export function table<R>(rows: readonly R[], columns: readonly Column<R>[]): string {
  const cells = rows.map((row) => columns.map((c) => cell(c.get(row))))
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((r) => r[i].length)))
  const line = (values: string[]) =>
    values
      .map((v, i) => (i === values.length - 1 ? v : v.padEnd(widths[i])))
      .join('  ')
      .trimEnd()
  return [line(columns.map((c) => c.header.toUpperCase())), ...cells.map(line)].join('\n') + '\n'
}
