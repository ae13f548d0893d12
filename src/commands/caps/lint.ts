import { Args, Flags } from '@oclif/core'
import { CorralCommand } from '../../cli/base-command.js'
import { FindingsExit } from '../../cli/errors.js'
import type { LintReport } from '../../policy/format.js'

const FORMATS = ['text', 'json', 'sarif', 'github'] as const
type Format = (typeof FORMATS)[number]

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
    format: Flags.option({ options: FORMATS, default: 'text' as Format, summary: 'Output format (--json is the same as --format json).' })(),
  }

  #format: Format = 'text'
  #sources = new Map<string, string>()
  #fmt?: typeof import('../../policy/format.js')
  #relative: (file: string) => string = (f) => f

  async execute(): Promise<LintReport> {
    const { argv, flags } = await this.parse(CapsLint)
    this.#format = this.jsonEnabled() ? 'json' : flags.format
    // Lazy imports keep `corral --help` and the other commands' startup cheap.
    const { readPolicyInputs, repoRelative } = await import('../../policy/lint-inputs.js')
    const { lintSources, toJsonReport } = await import('../../policy/lint.js')
    this.#fmt = await import('../../policy/format.js')
    this.#relative = repoRelative
    this.#sources = await readPolicyInputs(argv as string[])
    const report = lintSources(this.#sources)
    if (report.files.some((f) => !f.valid)) {
      if (this.jsonEnabled()) process.stdout.write(JSON.stringify(toJsonReport(report)) + '\n')
      else this.#print(report)
      throw new FindingsExit('policy errors found')
    }
    return toJsonReport(report)
  }

  protected override render(report: LintReport): void {
    this.#print(report)
  }

  #print(report: LintReport): void {
    const { formatGithub, formatSarif, formatText, toJsonReport } = this.#fmt!
    switch (this.#format) {
      case 'json':
        process.stdout.write(JSON.stringify(toJsonReport(report)) + '\n')
        break
      case 'sarif':
        process.stdout.write(formatSarif(report))
        break
      case 'github':
        process.stdout.write(formatGithub(report, this.#relative))
        break
      default:
        process.stdout.write(formatText(report, this.#sources))
    }
  }
}
