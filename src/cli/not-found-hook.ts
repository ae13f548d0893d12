// An unknown command is a usage error like any other (exit 2, one line on stderr, or the JSON
// error envelope on stdout under --json), with the closest command suggested. It replaces
// @oclif/plugin-not-found, which exits 127 and colours its text by stdout's terminal even when
// stderr is a pipe; colour here follows stderr and NO_COLOR (output.ts).
import type { Hook } from '@oclif/core'
import { diag, paint } from './output.js'

const hook: Hook<'command_not_found'> = async function (opts) {
  const sep = opts.config.topicSeparator
  const shown = (id: string) => id.replaceAll(':', sep)
  const visible = opts.config.commands.filter((c) => !c.hidden).flatMap((c) => [c.id, ...c.aliases])
  const topic = opts.id.split(':')[0]!
  const help = `${opts.config.bin} help${opts.config.findTopic(topic) ? ` ${shown(topic)}` : ''}`
  const suggestion = closest(opts.id, visible)
  const message = `${JSON.stringify(shown(opts.id))} is not a ${opts.config.bin} command.${suggestion ? ` Did you mean ${JSON.stringify(shown(suggestion))}?` : ''} Run \`${help}\` for a list of commands.`
  if ((opts.argv ?? []).includes('--json')) {
    process.stdout.write(`${JSON.stringify({ error: { code: 'usage_error', message, ...(suggestion ? { details: { suggestion: shown(suggestion) } } : {}) }, exit_code: 2 })}\n`)
  } else {
    diag(`${paint('red', 'Error:', process.stderr)} ${message}`)
  }
  this.exit(2)
}

export default hook

/**
 * The command id nearest to `id` by edit distance, when it is near enough to be a typo. Arguments
 * after a mistyped command are part of `id` (oclif cannot tell them apart): each candidate is
 * compared with as many leading words of `id` as it has.
 */
function closest(id: string, ids: readonly string[]): string | undefined {
  const words = id.split(':')
  let best: { id: string; d: number } | undefined
  for (const candidate of ids) {
    const typed = words.slice(0, candidate.split(':').length).join(':')
    const d = distance(typed, candidate)
    if (!best || d < best.d) best = { id: candidate, d }
  }
  return best && best.d <= Math.max(2, Math.floor(best.id.length / 3)) ? best.id : undefined
}

/** Levenshtein distance, one row at a time. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    prev = row
  }
  return prev[b.length]!
}
