// `corral caps lint` as plain functions, shared by the oclif command (src/commands/caps/lint.ts)
// and by bin/run.js (which loads dist/cli/caps-lint.js), which serves the plain invocations without loading oclif at all: lint runs
// in CI on every push, and oclif's start-up (config, plugins, manifest) would be most of its
// wall time. Both paths read, compile and render through the same functions, so their output
// and exit codes are the same byte for byte.

import type { LintReport } from '../policy/index.js'

export const LINT_FORMATS = ['text', 'json', 'sarif', 'github'] as const
export type LintFormat = (typeof LINT_FORMATS)[number]

export interface LintRun {
  report: LintReport
  sources: Map<string, string>
}

/** Reads the inputs ("-" is standard input) and lints them. Unreadable inputs throw UsageError. */
export async function lintFiles(files: string[]): Promise<LintRun> {
  const [{ readPolicyInputs }, { lintSources }] = await Promise.all([import('./policy-inputs.js'), import('../policy/index.js')])
  const sources = await readPolicyInputs(files)
  return { report: lintSources(sources), sources }
}

/** The report as the chosen format prints it. */
export async function renderLint(run: LintRun, format: LintFormat): Promise<string> {
  const fmt = await import('../policy/index.js')
  switch (format) {
    case 'json':
      return JSON.stringify(fmt.toJsonReport(run.report)) + '\n'
    case 'sarif':
      return fmt.formatSarif(run.report)
    case 'github': {
      const { repoRelative } = await import('./policy-inputs.js')
      return fmt.formatGithub(run.report, repoRelative)
    }
    default:
      return fmt.formatText(run.report, run.sources)
  }
}

/**
 * The arguments of `caps lint` when they are plain: files, "-", and `--format X` / `--format=X`
 * with a known X. Anything else (--json, --help, an unknown flag or format, "--") returns
 * undefined and is left to oclif, which owns flag parsing, help and usage errors.
 */
export function plainLintArgs(args: readonly string[]): { files: string[]; format: LintFormat } | undefined {
  const files: string[] = []
  let format: LintFormat | undefined
  for (let i = 0; i < args.length; i++) {
    const a = args[i]
    let value: string | undefined
    if (a === '--format') value = args[++i]
    else if (a.startsWith('--format=')) value = a.slice('--format='.length)
    else if (a === '-' || !a.startsWith('-')) {
      files.push(a)
      continue
    } else return undefined
    if (format !== undefined || !(LINT_FORMATS as readonly string[]).includes(value ?? '')) return undefined
    format = value as LintFormat
  }
  return { files, format: format ?? 'text' }
}

/**
 * Runs a plain `caps lint` without oclif. Returns false, having written nothing, when the
 * arguments are not plain or linting fails (an unreadable input is a usage error): oclif then
 * runs the command and reports the error exactly as it always does.
 */
export async function lintWithoutOclif(args: readonly string[]): Promise<boolean> {
  const plain = plainLintArgs(args)
  if (!plain) return false
  // Without files lint reads standard input, or (on a terminal) refuses: that refusal is oclif's to print.
  if (plain.files.length === 0 && process.stdin.isTTY) return false
  let run: LintRun
  try {
    run = await lintFiles(plain.files)
  } catch {
    // An unreadable input (exit 2) or anything unexpected: nothing was written yet.
    return false
  }
  process.stdout.write(await renderLint(run, plain.format))
  if (run.report.files.some((f) => !f.valid)) process.exitCode = 1
  return true
}
