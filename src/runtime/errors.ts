import { CorralError } from '../contract/index.js'

// Runtime failures that reach the API keep the spec's codes where the spec names one
// (`workspace_not_found`, not found for a missing snapshot); the others are runtime faults.
export const RUNTIME_ERROR_CODES = ['workspace_not_found', 'not_found', 'agent_running', 'runtime_unavailable', 'unsafe_path', 'validation_error'] as const
export type RuntimeErrorCode = (typeof RUNTIME_ERROR_CODES)[number]

const STATUS: Record<RuntimeErrorCode, number> = {
  workspace_not_found: 404,
  not_found: 404,
  agent_running: 409,
  runtime_unavailable: 503,
  // A path inside a workspace that serve refuses to use (a link the workspace made): held-dir.ts.
  unsafe_path: 409,
  // A snapshot read of a path that is not a file or directory inside /data (snapshot-content.ts).
  validation_error: 400,
}

export class RuntimeError extends CorralError {
  constructor(code: RuntimeErrorCode, message: string, details?: Record<string, unknown>, options?: { cause?: unknown }) {
    super(code, message, STATUS[code], details, options)
    this.name = 'RuntimeError'
  }
}
