// Four renderings of one diagnostics list: text (with source line and caret), JSON, SARIF 2.1.0
// and GitHub workflow annotations.

import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { CODES, type Code } from './codes.js'
import type { Diagnostic } from './types.js'

export interface FileReport {
  file: string
  valid: boolean
  diagnostics: Diagnostic[]
}

export interface LintReport {
  files: FileReport[]
}

/** The exact JSON shape of `--format json`. */
export function toJsonReport(report: LintReport): LintReport {
  return {
    files: report.files.map((f) => ({
      file: f.file,
      valid: f.valid,
      diagnostics: f.diagnostics.map((d) => ({ severity: d.severity, code: d.code, message: d.message, path: d.path, line: d.line, column: d.column })),
    })),
  }
}

export function formatText(report: LintReport, sources: ReadonlyMap<string, string>): string {
  let out = ''
  for (const f of report.files) {
    const lines = (sources.get(f.file) ?? '').split(/\r?\n/)
    for (const d of f.diagnostics) {
      out += `${f.file}:${d.line}:${d.column}: ${d.severity} ${d.code} ${d.message}\n`
      const src = lines[d.line - 1]
      if (src !== undefined && src.length <= 500 && !/[\u0000-\u0008\u000e-\u001f]/.test(src)) {
        out += `  ${src}\n  ${' '.repeat(Math.max(0, d.column - 1))}^\n`
      }
    }
  }
  const errors = report.files.reduce((n, f) => n + f.diagnostics.filter((d) => d.severity === 'error').length, 0)
  const warnings = report.files.reduce((n, f) => n + f.diagnostics.filter((d) => d.severity === 'warning').length, 0)
  out += `${report.files.length} file${report.files.length === 1 ? '' : 's'} checked: ${errors} error${errors === 1 ? '' : 's'}, ${warnings} warning${warnings === 1 ? '' : 's'}\n`
  return out
}

/** SARIF artifact URIs: relative paths as URI references, absolute paths as file: URLs. */
function artifactUri(file: string): string {
  if (path.isAbsolute(file)) return pathToFileURL(file).href
  return file.split(path.sep).join('/').split('/').map(encodeURIComponent).join('/')
}

const DOCS_URL = 'https://github.com/corral-dev/corral/blob/main/docs/caps-rules.md'

export function formatSarif(report: LintReport): string {
  const codes = Object.keys(CODES) as Code[]
  const index = new Map(codes.map((c, i) => [c, i]))
  const sarif = {
    $schema: 'https://json.schemastore.org/sarif-2.1.0.json',
    version: '2.1.0',
    runs: [
      {
        tool: {
          driver: {
            name: 'corral caps lint',
            informationUri: DOCS_URL,
            rules: codes.map((c) => ({
              id: c,
              name: c,
              shortDescription: { text: CODES[c].title },
              helpUri: `${DOCS_URL}#${c}`,
              defaultConfiguration: { level: CODES[c].severity },
            })),
          },
        },
        results: report.files.flatMap((f) =>
          f.diagnostics.map((d) => ({
            ruleId: d.code,
            ...(index.has(d.code as Code) ? { ruleIndex: index.get(d.code as Code) } : {}),
            level: d.severity,
            message: { text: d.message },
            locations: [
              {
                physicalLocation: { artifactLocation: { uri: artifactUri(f.file) }, region: { startLine: d.line, startColumn: d.column } },
                ...(d.path ? { logicalLocations: [{ fullyQualifiedName: d.path, kind: 'member' }] } : {}),
              },
            ],
          })),
        ),
      },
    ],
  }
  return JSON.stringify(sarif, null, 2) + '\n'
}

function escapeData(s: string): string {
  return s.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A')
}

function escapeProperty(s: string): string {
  return escapeData(s).replace(/:/g, '%3A').replace(/,/g, '%2C')
}

/** GitHub annotations; `relative` maps a file to its repository-relative path. */
export function formatGithub(report: LintReport, relative: (file: string) => string): string {
  let out = ''
  for (const f of report.files) {
    for (const d of f.diagnostics) {
      out += `::${d.severity} file=${escapeProperty(relative(f.file))},line=${d.line},col=${d.column},title=${escapeProperty(d.code)}::${escapeData(`${d.message} (${d.path || '/'})`)}\n`
    }
  }
  return out
}
