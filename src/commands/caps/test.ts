import { Args } from '@oclif/core'
import { CorralCommand } from '../../cli/base-command.js'
import { CliError, FindingsExit, UsageError } from '../../cli/errors.js'
import { diag, paint } from '../../cli/output.js'
import type { CasesReport } from '../../policy/index.js'

export interface CapsTestResult extends CasesReport {
  policy: string
  cases_file: string
}

export default class CapsTest extends CorralCommand<CapsTestResult> {
  static override summary = 'Run policy unit tests: each case goes through the same compiled policy the proxy uses.'
  static override description = 'Exit 0 when every case passes, 1 when any fails (or the policy does not compile), 2 for unreadable or malformed inputs. The cases format is in docs/policy.md.'
  static override examples = ['<%= config.bin %> caps test examples/llm-provider.yaml examples/llm-provider.cases.yaml']
  static override args = {
    policy: Args.string({ required: true, description: 'caps.yaml policy file.' }),
    cases: Args.string({ required: true, description: 'Cases file (YAML).' }),
  }

  async execute(): Promise<CapsTestResult> {
    const { args } = await this.parse(CapsTest)
    const { readInput } = await import('../../cli/policy-inputs.js')
    const { compilePolicy, parseCases, runCases, CasesFileError, formatText } = await import('../../policy/index.js')
    const source = await readInput(args.policy)
    const compiled = compilePolicy(source, { file: args.policy })
    if (!compiled.ok) {
      diag(formatText({ files: [{ file: args.policy, valid: false, diagnostics: [...compiled.diagnostics] }] }, new Map([[args.policy, source]])).trimEnd())
      throw new CliError(`${args.policy} does not compile; fix it with caps lint first`, 'invalid_capabilities')
    }
    let cases
    try {
      cases = parseCases(await readInput(args.cases))
    } catch (e) {
      if (e instanceof CasesFileError) throw new UsageError(`${args.cases}: ${e.message}`)
      throw e
    }
    const result: CapsTestResult = { policy: args.policy, cases_file: args.cases, ...runCases(compiled.policy, cases) }
    if (result.failed > 0) {
      if (this.jsonEnabled()) process.stdout.write(JSON.stringify(result) + '\n')
      else this.render(result)
      throw new FindingsExit(`${result.failed} case(s) failed`)
    }
    return result
  }

  protected override render(result: CapsTestResult): void {
    let out = ''
    for (const c of result.cases) {
      out += `${c.passed ? paint('green', 'ok  ') : paint('red', 'FAIL')} ${c.name}\n`
      for (const f of c.failures) {
        out += `       ${f.field}:\n`
        out += `         ${paint('green', `- expected ${JSON.stringify(f.expected)}`)}\n`
        out += `         ${paint('red', `+ actual   ${JSON.stringify(f.actual)}`)}\n`
      }
    }
    out += `${result.passed} passed, ${result.failed} failed\n`
    process.stdout.write(out)
  }
}
