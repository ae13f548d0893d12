// The base error of corral's API surface. Any module may throw a CorralError with a closed-enum
// `code` and an HTTP `status`; the server's root error handler renders it as the spec's envelope
// (`error.code`, `error.message`, `error.request_id`, `error.details`). Branch on `code`, never on
// message text. The catalogue of codes and statuses lives in src/server/errors.ts.

export class CorralError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly status: number,
    readonly details?: Record<string, unknown>,
    options?: { cause?: unknown },
  ) {
    super(message, options)
    this.name = 'CorralError'
  }
}
