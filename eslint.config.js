// The size check (`npm run lint:size`, docs/design.md "How the layout is enforced"): no file under
// src/ over 400 lines, no function over 80 lines. ESLint is here for these two core rules only;
// style is STYLE.md's and the reviewer's, types are tsc's. A function may run longer only when the
// line above it says why, in ESLint's own words:
//   // eslint-disable-next-line max-lines-per-function -- <why this one reads better whole>
// A file never may: split it. Lines are counted raw (comments and blank lines too), like `wc -l`.
import { defineConfig } from 'eslint/config'
import tseslint from 'typescript-eslint'

/** An exemption from the size rules must name a reason, and files get none. */
const exemptionsSayWhy = {
  meta: {
    type: 'problem',
    docs: { description: 'max-lines-per-function exemptions carry a reason after `--`; max-lines has no exemptions' },
    schema: [],
  },
  create(context) {
    return {
      Program() {
        for (const comment of context.sourceCode.getAllComments()) {
          const text = comment.value.trim()
          const directive = /^eslint-(disable|enable)(-next-line|-line)?(?:\s+([^]*))?$/.exec(text)
          if (!directive) continue
          const [rules, why] = (directive[3] ?? '').split(/\s--\s|^--\s/)
          const names = rules.split(',').map((r) => r.trim()).filter(Boolean)
          if (directive[1] === 'disable' && names.length === 0) {
            context.report({ loc: comment.loc, message: 'Name the rule this switches off; a bare eslint-disable would switch off the size rules too.' })
          }
          if (names.includes('max-lines')) {
            context.report({ loc: comment.loc, message: 'No file is exempt from the 400-line limit: split the file by responsibility.' })
          }
          if (names.includes('max-lines-per-function')) {
            if (directive[2] !== '-next-line') {
              context.report({ loc: comment.loc, message: 'Exempt one function at a time: `// eslint-disable-next-line max-lines-per-function -- <why>` on the line above it.' })
            } else if (!why?.trim()) {
              context.report({ loc: comment.loc, message: 'Say why this function is longer than 80 lines: `-- <why>` after the rule name.' })
            }
          }
        }
      },
    }
  },
}

export default defineConfig([
  {
    files: ['src/**/*.ts', 'src/**/*.tsx'],
    languageOptions: { parser: tseslint.parser },
    // The plugin is registered so that existing `@typescript-eslint/...` directives name a known
    // rule; none of its rules is switched on here.
    plugins: { '@typescript-eslint': tseslint.plugin, corral: { rules: { 'exemptions-say-why': exemptionsSayWhy } } },
    linterOptions: { reportUnusedDisableDirectives: 'off' },
    rules: {
      'max-lines': ['error', { max: 400 }],
      'max-lines-per-function': ['error', { max: 80 }],
      'corral/exemptions-say-why': 'error',
    },
  },
])
