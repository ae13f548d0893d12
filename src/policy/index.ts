// Public API of the caps.yaml compiler. The proxy and the server import from here only.

export { compilePolicy, compilePolicyCached } from './compile.js'
export { AUTH_PROVIDERS, isAuthProvider, isStaticAuthProvider, type AuthFamily, type AuthPlacement, type AuthProvider, type AuthProviderSlug } from './auth-providers.js'
export { CODES, type Code, type CodeInfo } from './codes.js'
export { compileDomain, normalizeHost } from './glob.js'
export { compileSchema, summarizeErrors, type SchemaCompileResult } from './json-schema.js'
export { canonicalPath, targetPath, type PathResult } from './path.js'
export { lintSources } from './lint.js'
export { formatGithub, formatSarif, formatText, toJsonReport, type FileReport, type LintReport } from './format.js'
export { CasesFileError, parseCases, runCases, type CasesReport } from './cases.js'
export { MAX_SOURCE_BYTES } from './yaml-reader.js'
export { makeCounter, type CounterSpec } from './counters.js'
export type * from './types.js'
