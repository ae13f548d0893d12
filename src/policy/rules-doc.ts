// Renders docs/caps-rules.md from the code catalogue, so the documented examples are the tested
// ones. test/policy/compile.test.ts fails when the file drifts; regenerate with
//   node --import tsx -e "import('./src/policy/rules-doc.ts').then(async (m) => (await import('node:fs')).writeFileSync('docs/caps-rules.md', m.renderRulesDoc()))"
// (policy does no I/O: the file is written by the command, not by this module).

import { CODES } from './codes.js'

export function renderRulesDoc(): string {
  let out = `# caps.yaml lint rules

Every diagnostic of \`corral caps lint\` (and of role create/patch, \`invalid_capabilities\`) carries one of
these stable codes. The code is also the SARIF \`ruleId\` and the GitHub annotation title. Each entry
shows a document that raises the rule and a corrected one; \`test/policy/compile.test.ts\` checks every
pair against the compiler, so the examples stay true. Grammar and semantics: docs/policy.md and the
spec's "Capability policy document". This file is generated from \`src/policy/codes.ts\`.

Severity \`error\` makes a document invalid (exit 1); \`warning\` flags something legal but likely wrong.

`
  for (const [code, info] of Object.entries(CODES)) {
    out += `## ${code}\n\n**${info.severity}** — ${info.title}\n\nBad:\n\n\`\`\`yaml\n${info.bad.trimEnd()}\n\`\`\`\n\nGood:\n\n\`\`\`yaml\n${info.good.trimEnd()}\n\`\`\`\n\n`
  }
  return out
}
