// `corral caps lint --api-url …`: after the offline lint, each file that compiles is checked
// against an org — the credential and secret names its transforms use that the org lacks, exactly
// what saving it in a role would warn about (POST /v1/agent-roles/check; docs/roles.md). Warnings,
// not errors: the exit code stays lint's.
import type { RolesApi, RoleWarning } from '../client/index.js'
import type { LintReport } from '../policy/index.js'
import type { LintFormat, LintRun } from './caps-lint.js'

export interface OrgWarning extends RoleWarning {
  file: string
}

/** The org's warnings for every file of the run that compiled, in file order. */
export async function orgWarnings(run: LintRun, roles: RolesApi): Promise<OrgWarning[]> {
  const out: OrgWarning[] = []
  for (const f of run.report.files) {
    const source = run.sources.get(f.file)
    if (!f.valid || source === undefined) continue
    for (const w of await roles.checkCapabilities(source)) out.push({ file: f.file, ...w })
  }
  return out
}

/** The JSON report with the org's warnings beside the files. */
export function withOrgWarnings(report: LintReport, warnings: readonly OrgWarning[]): LintReport & { org_warnings: OrgWarning[] } {
  return { ...report, org_warnings: [...warnings] }
}

/** The warnings as text (`file: warning code: message`) or GitHub annotations; '' for the other formats. */
export function renderOrgWarnings(warnings: readonly OrgWarning[], format: LintFormat): string {
  const line = (w: OrgWarning) => `${w.message} (named by ${w.capabilities.join(', ')})`
  if (format === 'text') return warnings.map((w) => `${w.file}: warning ${w.code}: ${line(w)}\n`).join('')
  if (format === 'github') return warnings.map((w) => `::warning file=${w.file},title=${w.code}::${line(w)}\n`).join('')
  return ''
}

/** SARIF output has no place for them: one stderr line each. */
export function orgWarningLines(warnings: readonly OrgWarning[]): string[] {
  return warnings.map((w) => `${w.file}: warning ${w.code}: ${w.message} (named by ${w.capabilities.join(', ')})`)
}
