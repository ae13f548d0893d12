// caps.yaml checks over HTTP, for the web console's policy editor (an addition to the spec,
// docs/api.md "Policy checks"): `POST /v1/caps/lint` compiles a caps.yaml source with the same
// compiler as `corral caps lint` and the proxy (src/policy/) and answers its diagnostics at
// line:column; `POST /v1/caps/test` runs `caps test` cases against it. Pure computation: nothing is
// stored, nothing audited, no secret of the org is read (a case brings its own secrets).
import type { FastifyInstance } from 'fastify'
import { apiError } from '../../contract/index.js'
import { CasesFileError, compilePolicy, MAX_SOURCE_BYTES, parseCases, runCases, type CompiledPolicy, type Diagnostic } from '../../policy/index.js'
import type { ServerDeps } from '../types.js'

const source = { type: 'string', maxLength: MAX_SOURCE_BYTES } as const
const diagnostic = {
  type: 'object',
  required: ['severity', 'code', 'message', 'path', 'line', 'column'],
  properties: { severity: { type: 'string' }, code: { type: 'string' }, message: { type: 'string' }, path: { type: 'string' }, line: { type: 'integer' }, column: { type: 'integer' } },
} as const
const scope = { type: 'object', required: ['max'], properties: { max: { type: 'integer' }, ttl: { type: 'string' } } } as const
const counter = {
  type: 'object',
  required: ['capability', 'name', 'source'],
  properties: { capability: { type: 'string' }, name: { type: 'string' }, source: { type: 'string' }, workspace: scope, task: scope },
} as const
const lintAnswer = {
  type: 'object',
  required: ['valid', 'diagnostics', 'counters'],
  properties: { valid: { type: 'boolean' }, diagnostics: { type: 'array', items: diagnostic }, counters: { type: 'array', items: counter } },
} as const
const caseResult = {
  type: 'object',
  required: ['name', 'passed', 'failures'],
  properties: {
    name: { type: 'string' },
    passed: { type: 'boolean' },
    failures: { type: 'array', items: { type: 'object', required: ['field'], properties: { field: { type: 'string' }, expected: {}, actual: {} } } },
  },
} as const
const testAnswer = {
  type: 'object',
  required: ['passed', 'failed', 'cases'],
  properties: { passed: { type: 'integer' }, failed: { type: 'integer' }, cases: { type: 'array', items: caseResult } },
} as const

const wire = (d: Diagnostic) => ({ severity: d.severity, code: d.code, message: d.message, path: d.path, line: d.line, column: d.column })

/** Every budget counter of the policy with its ceilings (the console's budgets page reads these). */
function countersOf(policy: CompiledPolicy) {
  const out = (s: { max: number; ttl?: string } | undefined) => (s ? { max: s.max, ...(s.ttl ? { ttl: s.ttl } : {}) } : undefined)
  return policy.capabilities.flatMap((c) =>
    c.counters.map((k) => ({ capability: c.name, name: k.name, source: k.source, ...(k.workspace ? { workspace: out(k.workspace) } : {}), ...(k.task ? { task: out(k.task) } : {}) })),
  )
}

export async function capsRoutes(app: FastifyInstance, _deps: ServerDeps): Promise<void> {
  app.post<{ Body: { capabilities: string } }>(
    '/caps/lint',
    {
      // Any caller of the org: linting reads nothing of the org and changes nothing.
      config: { permission: null },
      schema: {
        body: { type: 'object', required: ['capabilities'], additionalProperties: false, properties: { capabilities: source } },
        response: { 200: lintAnswer },
      },
    },
    async (request) => {
      const res = compilePolicy(request.body.capabilities, { file: 'caps.yaml' })
      return { valid: res.ok, diagnostics: res.diagnostics.map(wire), counters: res.ok ? countersOf(res.policy) : [] }
    },
  )

  app.post<{ Body: { capabilities: string; cases: string } }>(
    '/caps/test',
    {
      config: { permission: null },
      schema: {
        body: { type: 'object', required: ['capabilities', 'cases'], additionalProperties: false, properties: { capabilities: source, cases: { type: 'string', maxLength: MAX_SOURCE_BYTES } } },
        response: { 200: testAnswer },
      },
    },
    async (request) => {
      const res = compilePolicy(request.body.capabilities, { file: 'caps.yaml' })
      if (!res.ok) {
        const first = res.diagnostics.find((d) => d.severity === 'error') ?? res.diagnostics[0]
        throw apiError('validation_error', `the policy does not compile${first ? `: ${first.line}:${first.column} ${first.code} ${first.message}` : ''}`, {
          fields: { capabilities: 'does not compile (see POST /v1/caps/lint)' },
        })
      }
      try {
        return runCases(res.policy, parseCases(request.body.cases))
      } catch (err) {
        // The cases are the caller's input: a shape the runner cannot take is theirs to fix, not a 500.
        const message = err instanceof CasesFileError ? err.message : `a case could not run: ${(err as Error).message}`
        throw apiError('validation_error', message, { fields: { cases: message } })
      }
    },
  )
}
