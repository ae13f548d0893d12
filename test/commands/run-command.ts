// Runs one command class in-process (the TypeScript source, no build) with real oclif parsing and
// captures what it writes to stdout and stderr plus the exit code the base command chose.

import { Config } from '@oclif/core'
import { fileURLToPath } from 'node:url'
import { format } from 'node:util'
import { vi } from 'vitest'

const root = fileURLToPath(new URL('../../', import.meta.url))
let config: Config | undefined

export interface RunResult {
  stdout: string
  stderr: string
  exitCode: number
  result: unknown
}

type Runnable = { run(argv: string[], opts: Config): Promise<unknown> }

export async function runCommand(command: Runnable, argv: string[], env: Record<string, string | undefined> = {}): Promise<RunResult> {
  config ??= await Config.load(root)
  let stdout = ''
  let stderr = ''
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => ((stdout += String(chunk)), true))
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => ((stderr += String(chunk)), true))
  // oclif prints --json results through console.log, which vitest intercepts; capture it too.
  const log = vi.spyOn(console, 'log').mockImplementation((...args: unknown[]) => void (stdout += format(...args) + '\n'))
  const error = vi.spyOn(console, 'error').mockImplementation((...args: unknown[]) => void (stderr += format(...args) + '\n'))
  const saved: Record<string, string | undefined> = {}
  for (const [k, v] of Object.entries(env)) {
    saved[k] = process.env[k]
    if (v === undefined) delete process.env[k]
    else process.env[k] = v
  }
  process.exitCode = undefined
  let result: unknown
  try {
    result = await command.run(argv, config)
  } finally {
    out.mockRestore()
    err.mockRestore()
    log.mockRestore()
    error.mockRestore()
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
  }
  const exitCode = typeof process.exitCode === 'number' ? process.exitCode : 0
  process.exitCode = undefined
  return { stdout, stderr, exitCode, result }
}
