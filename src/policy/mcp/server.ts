// The MCP server policy of one allow rule: which JSON-RPC methods, tools, resources and prompts
// the agent may use, and with which arguments. Names are compared exactly, code unit by code unit:
// a tool name in another case or spelled with look-alike characters (which NFKC would fold, or
// which only look alike) names another tool, and no allow covers it. Pure; never throws.
import type { ValidateFunction } from 'ajv'
import { CEL_CALL_BUDGET } from '../cel-cost.js'
import { withCelBudget } from '../cel-meter.js'
import type { CelProgram } from '../cel.js'
import { summarizeErrors } from '../json-schema.js'
import type { McpCall, McpListKind, McpServerPolicy, McpVerdict, PolicyContext } from '../types.js'

export interface CMcpTool {
  name: string
  schema?: ValidateFunction
  when?: CelProgram
  convert: (v: unknown) => unknown
}

export interface CMcpResource {
  index: number
  /** Exact URI, or a prefix when the pattern ended in `*`. */
  uri: string
  prefix: boolean
  when?: CelProgram
}

export interface CMcpPrompt {
  name: string
  when?: CelProgram
}

export interface CMcpServer {
  server: string
  tools: ReadonlyMap<string, CMcpTool>
  resources: readonly CMcpResource[]
  prompts: ReadonlyMap<string, CMcpPrompt>
  methods: ReadonlySet<string>
  defaultAllow: boolean
}

/** The protocol's own messages: a server cannot be used without them, and they carry no payload of the agent's. */
const LIFECYCLE = new Set(['initialize', 'ping', 'notifications/initialized', 'notifications/cancelled', 'notifications/progress', 'notifications/roots/list_changed'])
/** List methods: always answered, their results filtered to what the policy allows. */
const LISTS = new Set(['tools/list', 'resources/list', 'resources/templates/list', 'prompts/list'])

const EMPTY_WS = Object.freeze({ id: '', org_id: '', role: '', environment: '' })

export class McpServer implements McpServerPolicy {
  readonly server: string
  readonly #c: CMcpServer

  constructor(c: CMcpServer) {
    this.server = c.server
    this.#c = c
    Object.freeze(this)
  }

  decide(call: McpCall, context: PolicyContext): McpVerdict {
    try {
      return withCelBudget(CEL_CALL_BUDGET, () => this.#decide(call, context))
    } catch (e) {
      return { allow: false, rule: 'error', reason: 'policy_error', message: errorLine(e) }
    }
  }

  #decide(call: McpCall, context: PolicyContext): McpVerdict {
    const { method } = call
    const isNotificationMethod = method.startsWith('notifications/')
    // A request method without an id would run on the server with no answer to deny into; a
    // notification method with an id is not a notification. Either is refused.
    if (call.kind === 'notification' && !isNotificationMethod) return refuse('notification', `"${method}" is a request method and was sent as a notification (no id)`)
    if (call.kind === 'request' && isNotificationMethod) return refuse('notification', `"${method}" is a notification method and was sent with an id`)
    if (LIFECYCLE.has(method)) return { allow: true, rule: 'lifecycle' }
    if (LISTS.has(method)) return { allow: true, rule: 'list' }
    switch (method) {
      case 'tools/call':
        return this.#tool(call.params, context)
      case 'resources/read':
        return this.#resource(call.params, context)
      case 'prompts/get':
        return this.#prompt(call.params, context)
    }
    if (this.#c.methods.has(method)) return { allow: true, rule: `methods/${method}` }
    if (this.#c.defaultAllow) return { allow: true, rule: 'default' }
    return refuse('default', `method "${method}" is not allowed on MCP server "${this.server}"`)
  }

  #tool(params: unknown, context: PolicyContext): McpVerdict {
    const p = asObject(params)
    if (!p || typeof p.name !== 'string') return refuse('tools', 'tools/call needs params.name (a string)', 'schema_violation')
    const name = p.name
    const tool = this.#c.tools.get(name)
    if (!tool) return { ...refuse('tools', `tool ${JSON.stringify(name.slice(0, 128))} is not allowed on MCP server "${this.server}"`), tool: name }
    const rule = `tools/${name}`
    const args = p.arguments === undefined ? {} : p.arguments
    if (!asObject(args)) return { ...refuse(rule, 'params.arguments must be an object', 'schema_violation'), tool: name }
    if (tool.schema && !tool.schema(args)) {
      return { ...refuse(rule, `the arguments of tool "${name}" do not match its input_schema`, 'schema_violation'), errors: summarizeErrors(tool.schema.errors), tool: name }
    }
    if (!tool.when) return { allow: true, rule, tool: name }
    const verdict = runWhen(tool.when, { args: tool.convert(args), tool: name, ...ctxVars(context) }, rule, `the arguments of tool "${name}" do not satisfy its condition`)
    return { ...verdict, tool: name }
  }

  #resource(params: unknown, context: PolicyContext): McpVerdict {
    const p = asObject(params)
    if (!p || typeof p.uri !== 'string') return refuse('resources', 'resources/read needs params.uri (a string)', 'schema_violation')
    const uri = p.uri
    let last: McpVerdict | undefined
    for (const r of this.#c.resources) {
      if (!uriMatches(r, uri)) continue
      const rule = `resources[${r.index}]`
      if (!r.when) return { allow: true, rule, resource: uri }
      const v = runWhen(r.when, { uri, ...ctxVars(context) }, rule, `resource URI does not satisfy the condition of ${rule}`)
      if (v.allow || v.reason === 'policy_error') return { ...v, resource: uri }
      last = v
    }
    return { ...(last ?? refuse('resources', `resource ${JSON.stringify(uri.slice(0, 256))} is not allowed on MCP server "${this.server}"`)), resource: uri }
  }

  #prompt(params: unknown, context: PolicyContext): McpVerdict {
    const p = asObject(params)
    if (!p || typeof p.name !== 'string') return refuse('prompts', 'prompts/get needs params.name (a string)', 'schema_violation')
    const name = p.name
    const prompt = this.#c.prompts.get(name)
    if (!prompt) return { ...refuse('prompts', `prompt ${JSON.stringify(name.slice(0, 128))} is not allowed on MCP server "${this.server}"`), prompt: name }
    const rule = `prompts/${name}`
    const args = p.arguments === undefined ? {} : p.arguments
    // MCP's prompt arguments are strings (GetPromptRequest); the condition sees them as map<string, string>.
    const o = asObject(args)
    if (!o || Object.values(o).some((v) => typeof v !== 'string')) return { ...refuse(rule, 'params.arguments must be an object of strings', 'schema_violation'), prompt: name }
    if (!prompt.when) return { allow: true, rule, prompt: name }
    return { ...runWhen(prompt.when, { args, prompt: name, ...ctxVars(context) }, rule, `the arguments of prompt "${name}" do not satisfy its condition`), prompt: name }
  }

  listed(kind: McpListKind, item: unknown): boolean {
    const o = asObject(item)
    if (!o) return false
    switch (kind) {
      case 'tools':
        return typeof o.name === 'string' && this.#c.tools.has(o.name)
      case 'prompts':
        return typeof o.name === 'string' && this.#c.prompts.has(o.name)
      case 'resources':
        return typeof o.uri === 'string' && this.#c.resources.some((r) => uriMatches(r, o.uri as string))
      case 'resourceTemplates':
        // A template is shown only when a pattern names it as written; reads are decided by the concrete URI.
        return typeof o.uriTemplate === 'string' && this.#c.resources.some((r) => r.uri === o.uriTemplate && !r.prefix)
    }
  }
}

function uriMatches(r: CMcpResource, uri: string): boolean {
  return r.prefix ? uri.startsWith(r.uri) : uri === r.uri
}

function runWhen(program: CelProgram, vars: Record<string, unknown>, rule: string, falseMessage: string): McpVerdict {
  let v: unknown
  try {
    v = program.run(vars)
  } catch (e) {
    return { allow: false, rule, reason: 'policy_error', message: errorLine(e) }
  }
  if (v === true) return { allow: true, rule }
  if (v === false) return refuse(rule, falseMessage)
  return { allow: false, rule, reason: 'policy_error', message: `condition returned ${typeof v}, not bool` }
}

function refuse(rule: string, message: string, reason: McpVerdict['reason'] = 'no_match'): McpVerdict {
  return { allow: false, rule, reason, message }
}

function asObject(v: unknown): Record<string, unknown> | undefined {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined
}

function ctxVars(ctx: PolicyContext): Record<string, unknown> {
  return { workspace: ctx.workspace ?? EMPTY_WS, task: { id: ctx.task?.id ?? '' } }
}

function errorLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0].slice(0, 200)
}
