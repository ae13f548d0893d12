import { Args, Flags } from '@oclif/core'
import { CorralCommand } from '../../cli/base-command.js'
import { FindingsExit } from '../../cli/errors.js'
// caps-lint loads the compiler lazily, keeping `corral --help` and the other commands' startup cheap.
import { LINT_FORMATS, lintFiles, renderLint, type LintFormat } from '../../cli/caps-lint.js'
import type { LintReport } from '../../policy/index.js'

// bin/run.js serves the plain invocations (files, "-", --format) without oclif through the same
// functions of src/cli/caps-lint.ts; this class handles the rest (--json, --help, usage errors).
export default class CapsLint extends CorralCommand<LintReport> {
  static override summary = 'Check caps.yaml policy documents offline (no server needed).'
  static override description =
    'Reports every error and warning with a stable code (docs/caps-rules.md), a JSON Pointer and a line:column. Exit 0 when no file has an error, 1 when any has, 2 for usage errors or unreadable files.'
  static override examples = [
    '<%= config.bin %> caps lint caps.yaml',
    '<%= config.bin %> caps lint examples/*.yaml --format sarif > caps.sarif',
    'cat caps.yaml | <%= config.bin %> caps lint -',
  ]
  static override strict = false
  static override args = { file: Args.string({ description: 'Policy files to check; "-" reads standard input.' }) }
  static override flags = {
    format: Flags.option({ options: LINT_FORMATS, default: 'text' as LintFormat, summary: 'Output format (--json is the same as --format json).' })(),
  }

  #output = ''

  async execute(): Promise<LintReport> {
    const { argv, flags } = await this.parse(CapsLint)
    const format: LintFormat = this.jsonEnabled() ? 'json' : flags.format
    const { toJsonReport } = await import('../../policy/index.js')
    const run = await lintFiles(argv as string[])
    if (run.report.files.some((f) => !f.valid)) {
      process.stdout.write(await renderLint(run, format))
      throw new FindingsExit('policy errors found')
    }
    // Under --json oclif prints the returned report itself.
    if (!this.jsonEnabled()) this.#output = await renderLint(run, format)
    return toJsonReport(run.report)
  }

  protected override render(): void {
    process.stdout.write(this.#output)
  }
}
