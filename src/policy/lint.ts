// `caps lint` over already-read sources: one report entry per file, all diagnostics included.

import { compilePolicy } from './compile.js'
import type { LintReport } from './format.js'

export { toJsonReport } from './format.js'

export function lintSources(sources: ReadonlyMap<string, string>): LintReport {
  return {
    files: [...sources].map(([file, source]) => {
      const res = compilePolicy(source, { file })
      return { file, valid: res.ok, diagnostics: [...res.diagnostics] }
    }),
  }
}
