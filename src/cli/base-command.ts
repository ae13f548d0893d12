// Subpath imports: the package index would load all of oclif (semver included) for every command.
import { Command } from '@oclif/core/command'
import * as Errors from '@oclif/core/errors'
import type * as Interfaces from '@oclif/core/interfaces'
import { CliError, UsageError } from './errors.js'
import { diag, paint } from './output.js'

/**
 * Every corral command extends this. A command's `run()` returns its data; under `--json` oclif
 * prints it, otherwise `render()` draws it for people. `catch()` turns any error into one line on
 * stderr (or the JSON error envelope on stdout under `--json`) and an exit code chosen by class:
 * 0 ok, 1 failure or findings, 2 usage.
 */
export abstract class CorralCommand<T> extends Command {
  static override enableJsonFlag = true

  /** Draws the result for people. Not called under --json. */
  protected render(_result: T): void {}

  abstract execute(): Promise<T>

  /** Anything the flag/argument parser rejects is a usage error (exit 2), whatever oclif's class. */
  protected override async parse<F extends Interfaces.OutputFlags<any>, B extends Interfaces.OutputFlags<any>, A extends Interfaces.OutputArgs<any>>(
    options?: Interfaces.Input<F, B, A>,
    argv?: string[],
  ): Promise<Interfaces.ParserOutput<F, B, A>> {
    try {
      return await super.parse(options, argv)
    } catch (error) {
      this.parsed = true // it did parse, and failed: no "did not parse its arguments" warning
      throw new UsageError(`${usageLine(error)} (see --help)`)
    }
  }

  async run(): Promise<T> {
    const result = await this.execute()
    if (!this.jsonEnabled()) this.render(result)
    return result
  }

  protected override async catch(err: Error & { exitCode?: number }): Promise<void> {
    const normalized = normalizeError(err)
    process.exitCode = normalized.exitCode
    if (normalized.silent) return
    if (this.jsonEnabled()) {
      process.stdout.write(JSON.stringify({ error: normalized.envelope, exit_code: normalized.exitCode }) + '\n')
      return
    }
    diag(`${paint('red', 'Error:', process.stderr)} ${normalized.line}`)
  }
}

export interface NormalizedError {
  exitCode: number
  line: string
  silent: boolean
  envelope: { code: string; message: string; request_id?: string; details?: Record<string, unknown> }
}

/** One CLI error shape for every failure: one line naming what was wrong, a non-zero exit. */
export function normalizeError(err: Error & { exitCode?: number }): NormalizedError {
  // Envelope-carrying errors (the API client's ApiError) expose `envelope`; keep it whole.
  const withEnvelope = err as Error & {
    envelope?: { code: string; message: string; request_id?: string; details?: Record<string, unknown> }
    status?: number
  }
  if (withEnvelope.envelope) {
    const e = withEnvelope.envelope
    const rid = e.request_id ? ` (request ${e.request_id})` : ''
    return { exitCode: 1, silent: false, envelope: e, line: `${e.message} [${e.code}]${rid}` }
  }
  if (err instanceof CliError) {
    return {
      exitCode: err.exitCode,
      silent: err.code === 'findings',
      envelope: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) },
      line: err.message,
    }
  }
  if (err instanceof Errors.ExitError) {
    return { exitCode: err.oclif.exit ?? 1, silent: true, envelope: { code: 'exit', message: err.message }, line: err.message }
  }
  if (err instanceof Errors.CLIError) {
    return { exitCode: (err.oclif?.exit as number | undefined) ?? 1, silent: false, envelope: { code: 'cli_error', message: err.message }, line: err.message }
  }
  const code = (err as { code?: string }).code
  const message = err.message || String(err)
  return { exitCode: 1, silent: false, envelope: { code: typeof code === 'string' ? code : 'internal_error', message }, line: message }
}

/**
 * One line naming the flag or argument the parser rejected: "Missing required flag --label",
 * "Missing required argument ID", "Parsing --limit: Expected an integer but received: x". oclif's
 * own wrapping ("The following error occurred:", "See more help with --help") is dropped.
 */
export function usageLine(error: unknown): string {
  const e = error as { message?: string; args?: { name: string }[] }
  const message = typeof e?.message === 'string' ? e.message : String(error)
  if (/^Missing \d+ required args?:/.test(message) && Array.isArray(e.args) && e.args.length > 0) {
    const names = e.args.map((a) => a.name.toUpperCase())
    return `Missing required argument${names.length > 1 ? 's' : ''} ${names.join(', ')}`
  }
  const lines = message
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !/^The following errors? occurred:?$/.test(l) && !/^See more help with --help$/.test(l))
    .map((l) => l.replace(/^Missing required flag (?!-)(\S+)/, 'Missing required flag --$1'))
  if (lines.length === 0) return message
  // oclif reports a custom flag's parse failure as "Parsing --flag" with the reason on the next line.
  if (/^Parsing --\S+$/.test(lines[0]) && lines[1]) return [`${lines[0]}: ${lines[1]}`, ...lines.slice(2)].join('; ')
  return lines.join('; ')
}
