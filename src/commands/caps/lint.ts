import { Args, Flags } from '@oclif/core'
import { ApiCommand } from '../../cli/api-command.js'
import { FindingsExit } from '../../cli/errors.js'
// caps-lint loads the compiler lazily, keeping `corral --help` and the other commands' startup cheap.
import { LINT_FORMATS, lintFiles, renderLint, type LintFormat, type LintRun } from '../../cli/caps-lint.js'
import { diag } from '../../cli/output.js'
import type { LintReport } from '../../policy/index.js'

// bin/run.js serves the plain invocations (files, "-", --format) without oclif through the same
// functions of src/cli/caps-lint.ts; this class handles the rest (--json, --help, --api-url, usage errors).
export default class CapsLint extends ApiCommand<LintReport> {
  static override summary = 'Check caps.yaml policy documents offline (no server needed), or also against an org with --api-url.'
  static override description =
    'Reports every error and warning with a stable code (docs/caps-rules.md), a JSON Pointer and a line:column. With --api-url (and a token: --token, the profile or CORRAL_TOKEN) each file that compiles is also checked against that org: every credential or secret its transforms name that the org lacks is a warning (missing_credential, missing_secret; needs caps:write), as saving it in a role would warn (docs/roles.md). Exit 0 when no file has an error, 1 when any has, 2 for usage errors or unreadable files; an org check that cannot be made is one error line and exit 1.'
  static override examples = [
    '<%= config.bin %> caps lint caps.yaml',
    '<%= config.bin %> caps lint examples/*.yaml --format sarif > caps.sarif',
    'cat caps.yaml | <%= config.bin %> caps lint -',
    '<%= config.bin %> caps lint caps.yaml --api-url https://corral.example.com',
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
    const org = flags['api-url'] === undefined ? undefined : await this.#orgCheck(run)
    const report = org ? org.withOrgWarnings(toJsonReport(run.report), org.warnings) : toJsonReport(run.report)
    const output = async (): Promise<string> => {
      if (!org) return renderLint(run, format)
      if (format === 'json') return JSON.stringify(report) + '\n'
      if (format === 'sarif') for (const line of org.orgWarningLines(org.warnings)) diag(line)
      return (await renderLint(run, format)) + org.renderOrgWarnings(org.warnings, format)
    }
    if (run.report.files.some((f) => !f.valid)) {
      process.stdout.write(await output())
      throw new FindingsExit('policy errors found')
    }
    // Under --json oclif prints the returned report itself.
    if (!this.jsonEnabled()) this.#output = await output()
    return report
  }

  async #orgCheck(run: LintRun) {
    const [check, { rolesApi }] = await Promise.all([import('../../cli/caps-org-check.js'), import('../../client/index.js')])
    return { ...check, warnings: await check.orgWarnings(run, rolesApi(this.client)) }
  }

  protected override render(): void {
    process.stdout.write(this.#output)
  }
}
