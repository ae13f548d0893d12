// The compiled shape (distinct from the YAML shape): checked CEL programs, compiled globs and
// schemas. Built by src/policy/rules/*, frozen, and evaluated by policy.ts and counters.ts.

import type { ValidateFunction } from 'ajv'
import type { CelProgram } from './cel.js'
import type { Matcher } from './glob.js'
import type { CompiledCounter, McpServerPolicy } from './types.js'

export interface CRule {
  index: number
  name?: string
  key: string
  domainPatterns: string[]
  domains: Matcher[]
  methods: ReadonlySet<string>
  pathPatterns: string[]
  /** null means any path. */
  paths: Matcher[] | null
  allowInsecure: boolean
  /** Normalized CIDRs (`allow_private`), sorted; empty when the rule names none. */
  allowPrivate: readonly string[]
  match?: CelProgram
  matchRequiresBody: boolean
  requestFormat: '' | 'application/json'
  schema?: ValidateFunction
  /** Filled by the capability check once transforms are known. */
  needsBody: boolean
  /** The MCP server policy when the rule's destination is an MCP server (mcp/rules.ts). */
  mcp?: McpServerPolicy
  /** TLS spliced without decrypting (docs/policy.md "Passthrough"); such a rule admits no request. */
  passthrough: boolean
}

interface CTransformBase {
  index: number
  name?: string
  key: string
  /** null means every rule. */
  appliesTo: ReadonlySet<string> | null
  requiresBody: boolean
}

export type CTransform = CTransformBase &
  (
    | { kind: 'header'; header: string; action: 'set' | 'add' | 'remove'; value?: CelProgram }
    | { kind: 'path'; action: 'replace' | 'prefix'; pattern?: RegExpLike; value: CelProgram }
    | { kind: 'query'; param: string; action: 'set' | 'remove'; value?: CelProgram }
    | { kind: 'body'; action: 'merge' | 'prefix'; field?: string; value: CelProgram }
    | { kind: 'auth'; credential: string; provider: string }
  )

/** The part of RE2 we use for path replacement. */
export interface RegExpLike {
  replace(s: string, replacer: () => string): string
  test(s: string): boolean
}

export interface CCapability {
  index: number
  name: string
  rules: CRule[]
  transforms: CTransform[]
  counters: CompiledCounter[]
}
