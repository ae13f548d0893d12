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
      const message = error instanceof Error ? error.message : String(error)
      const lines = message.split('\n').map((l) => l.trim()).filter((l) => l !== '')
      // oclif reports a custom flag's parse failure as "Parsing --flag" with the reason on the next line.
      const first = /^Parsing --\S+$/.test(lines[0] ?? '') && lines[1] ? `${lines[0]}: ${lines[1]}` : (lines[0] ?? message)
      throw new UsageError(`${first} (see --help)`)
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

/** One CLI error shape for every failure (see STYLE.md §7). */
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
