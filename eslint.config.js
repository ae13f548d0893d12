// The size check (`npm run lint:size`, docs/design.md "How the layout is enforced"): no file under
// src/ over 400 lines, no function over 80 lines. ESLint is here for these two core rules only;
// style is STYLE.md's and the reviewer's, types are tsc's. Lines are counted raw (comments and
// blank lines too), like `wc -l`. A function may run longer only when a comment on the line above
// it (or in the comment block right above it) says why:
//   // long-function: <why this one reads better whole>
// A file never may: split it. Inline `eslint-disable` comments are off (noInlineConfig), so
// nothing in a source file can switch either rule off.
import { defineConfig } from 'eslint/config'
import { builtinRules } from 'eslint/use-at-your-own-risk'
import tseslint from 'typescript-eslint'

const MAX_FUNCTION_LINES = 80
const MARKER = /long-function:\s*\S/

const core = builtinRules.get('max-lines-per-function')

/** ESLint's own max-lines-per-function (its counting, its messages), minus functions under a marker. */
const maxLinesPerFunction = {
  meta: { ...core.meta, docs: { description: `${core.meta.docs.description}, unless the comment above says why (long-function: …)` } },
  create(context) {
    const commentLines = new Map()
    for (const c of context.sourceCode.getAllComments()) {
      for (let line = c.loc.start.line; line <= c.loc.end.line; line++) commentLines.set(line, `${commentLines.get(line) ?? ''} ${c.value}`)
    }
    /** True when the comment block that ends on the line above `node` carries the marker. */
    const exempt = (node) => {
      for (let line = node.loc.start.line - 1; commentLines.has(line); line--) {
        if (MARKER.test(commentLines.get(line))) return true
      }
      return false
    }
    const filtered = Object.create(context, {
      report: { value: (descriptor) => (descriptor.node && exempt(descriptor.node) ? undefined : context.report(descriptor)) },
    })
    return core.create(filtered)
  },
}

export default defineConfig([
  {
    files: ['src/**/*.ts', 'src/**/*.tsx'],
    languageOptions: { parser: tseslint.parser },
    plugins: { corral: { rules: { 'max-lines-per-function': maxLinesPerFunction } } },
    linterOptions: { noInlineConfig: true },
    rules: {
      'max-lines': ['error', { max: 400 }],
      'corral/max-lines-per-function': ['error', { max: MAX_FUNCTION_LINES }],
    },
  },
])
