// CLI-side error classes. The base command picks the exit code from the class alone
// (0 ok, 1 failure or findings, 2 usage), never from message text.

export class CliError extends Error {
  readonly exitCode: number = 1
  constructor(
    message: string,
    readonly code = 'cli_error',
    readonly details?: Record<string, unknown>,
  ) {
    super(message)
    this.name = 'CliError'
  }
}

/** Bad flags, arguments or unreadable inputs: exit 2. */
export class UsageError extends CliError {
  override readonly exitCode: number = 2
  constructor(message: string, details?: Record<string, unknown>) {
    super(message, 'usage_error', details)
    this.name = 'UsageError'
  }
}

/** A command ran fine but reports findings or failed cases (lint errors, failed policy tests): exit 1, no message line. */
export class FindingsExit extends CliError {
  constructor(message = 'findings reported') {
    super(message, 'findings')
    this.name = 'FindingsExit'
  }
}
