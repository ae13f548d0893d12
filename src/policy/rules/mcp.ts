// The `mcp` block of an allow rule: the rule's destination is an MCP server (streamable HTTP),
// and what the agent may do there is decided per JSON-RPC message: tools by name with a CEL
// condition over their arguments (typed by the declared input_schema), resources by URI, prompts
// by name, other methods by name, and a default for methods not named (deny).
import { isMap, type Node } from 'yaml'
import { compileSchema } from '../json-schema.js'
import { argsTyping } from '../mcp/schema-type.js'
import { McpServer, type CMcpPrompt, type CMcpResource, type CMcpTool } from '../mcp/server.js'
import type { CCapability } from '../model.js'
import type { McpServerPolicy } from '../types.js'
import { MapReader, type Reader } from '../yaml-reader.js'
import { celOf, readSchemaValue } from './shared.js'

const KEYS = ['server', 'tools', 'resources', 'prompts', 'methods', 'default'] as const
/** Methods the server policy decides itself (lifecycle, lists, tools, resources, prompts); naming them in `methods` would mean nothing. */
const DECIDED = new Set(['initialize', 'ping', 'tools/list', 'tools/call', 'resources/list', 'resources/templates/list', 'resources/read', 'prompts/list', 'prompts/get'])

export function checkMcpServer(r: Reader, node: Node, path: string, ruleKey: string): McpServerPolicy | undefined {
  if (!isMap(node)) return undefined
  const before = errors(r)
  const m = new MapReader(r, node, path, KEYS, 'mcp')
  const server = m.str('server')?.value || ruleKey
  const tools = checkTools(r, m)
  const resources = checkResources(r, m)
  const prompts = checkPrompts(r, m)
  const methods = new Set<string>()
  for (const it of m.strList('methods')?.items ?? []) {
    if (DECIDED.has(it.value)) r.error('field_rejected', `method "${it.value}" is decided by the MCP policy itself (list it under tools, resources or prompts)`, it.path, it.node)
    else methods.add(it.value)
  }
  const def = m.str('default')
  if (def && def.value !== 'allow' && def.value !== 'deny') r.error('invalid_enum', `"default" must be one of allow, deny; got ${JSON.stringify(def.value)}`, def.field.path, def.field.node)
  if (errors(r) > before) return undefined
  return new McpServer({ server, tools, resources, prompts, methods, defaultAllow: def?.value === 'allow' })
}

function errors(r: Reader): number {
  return r.diagnostics.filter((d) => d.severity === 'error').length
}

/** Names are matched exactly; one that NFKC would change (full-width, ligatures, compatibility forms) is refused at save time. */
function checkMcpName(r: Reader, value: string, path: string, node: Node | null, what: string): boolean {
  if (value === '' || value !== value.normalize('NFKC')) {
    r.error('mcp_name_not_canonical', `${what} ${JSON.stringify(value)} must be non-empty and in NFKC form (names are matched exactly, code point by code point)`, path, node)
    return false
  }
  if (!/^[\x21-\x7e]+$/.test(value)) r.warn('mcp_name_not_ascii', `${what} ${JSON.stringify(value)} has characters outside printable ASCII; a look-alike spelling of it will not match`, path, node)
  return true
}

function checkTools(r: Reader, m: MapReader): Map<string, CMcpTool> {
  const out = new Map<string, CMcpTool>()
  m.list('tools')?.items.forEach((it) => {
    if (!it.node || !isMap(it.node)) {
      r.error('invalid_type', 'a tool must be a mapping with a name', it.path, it.node)
      return
    }
    const tm = new MapReader(r, it.node, it.path, ['name', 'input_schema', 'when'], 'tool')
    tm.require('name', 'a tool')
    const name = tm.str('name')
    if (!name || !checkMcpName(r, name.value, name.field.path, name.field.node, 'tool name')) return
    if (out.has(name.value)) {
      r.error('duplicate_name', `tool "${name.value}" is already listed for this MCP server (join its conditions with ||)`, name.field.path, name.field.node)
      return
    }
    const sf = tm.field('input_schema')
    const schemaValue = sf ? readSchemaValue(r, sf, 'input_schema') : undefined
    const compiled = schemaValue === undefined ? undefined : compileSchema(schemaValue)
    if (compiled && !compiled.ok) r.error(compiled.code, `tool "${name.value}": ${compiled.message}`, sf!.path, sf!.node)
    const typing = argsTyping(compiled?.ok ? schemaValue : undefined, `tool:${name.value}`)
    const before = r.diagnostics.length
    const when = tm.has('when') ? celOf(tm, 'when', 'mcp_call', 'bool', { declare: typing.declarations }) : undefined
    // Name the tool in CEL diagnostics: "tool create_issue: undeclared reference: args.titel".
    for (const d of r.diagnostics.slice(before)) if (d.code.startsWith('cel_')) d.message = `tool "${name.value}": ${d.message}${d.code === 'cel_undeclared' && sf ? ' (not a property in its input_schema)' : ''}`
    out.set(name.value, { name: name.value, ...(compiled?.ok ? { schema: compiled.validate } : {}), ...(when ? { when } : {}), convert: typing.convert })
  })
  return out
}

function checkResources(r: Reader, m: MapReader): CMcpResource[] {
  const out: CMcpResource[] = []
  const declarations = { key: 'resource', types: [], vars: { uri: 'string' } }
  m.list('resources')?.items.forEach((it, index) => {
    if (!it.node || !isMap(it.node)) {
      r.error('invalid_type', 'a resource must be a mapping with a uri', it.path, it.node)
      return
    }
    const rm = new MapReader(r, it.node, it.path, ['uri', 'when'], 'resource')
    rm.require('uri', 'a resource')
    const uri = rm.str('uri')
    if (!uri || !checkMcpName(r, uri.value, uri.field.path, uri.field.node, 'resource uri')) return
    const prefix = uri.value.endsWith('*')
    const base = prefix ? uri.value.slice(0, -1) : uri.value
    if (base.includes('*')) r.error('invalid_path', 'a resource uri may end in "*" (a prefix) and contain no other "*"', uri.field.path, uri.field.node)
    if (prefix && !/^[a-z][a-z0-9+.-]*:\/\/[^/]*\//i.test(base)) r.warn('match_all_domain', `resource prefix "${uri.value}" does not fix a scheme, authority and "/"`, uri.field.path, uri.field.node)
    const when = rm.has('when') ? celOf(rm, 'when', 'mcp_call', 'bool', { declare: declarations }) : undefined
    out.push({ index, uri: base, prefix, ...(when ? { when } : {}) })
  })
  return out
}

function checkPrompts(r: Reader, m: MapReader): Map<string, CMcpPrompt> {
  const out = new Map<string, CMcpPrompt>()
  const declarations = { key: 'prompt', types: [], vars: { args: 'map<string, string>', prompt: 'string' } }
  m.list('prompts')?.items.forEach((it) => {
    if (!it.node || !isMap(it.node)) {
      r.error('invalid_type', 'a prompt must be a mapping with a name', it.path, it.node)
      return
    }
    const pm = new MapReader(r, it.node, it.path, ['name', 'when'], 'prompt')
    pm.require('name', 'a prompt')
    const name = pm.str('name')
    if (!name || !checkMcpName(r, name.value, name.field.path, name.field.node, 'prompt name')) return
    if (out.has(name.value)) {
      r.error('duplicate_name', `prompt "${name.value}" is already listed for this MCP server`, name.field.path, name.field.node)
      return
    }
    const when = pm.has('when') ? celOf(pm, 'when', 'mcp_call', 'bool', { declare: declarations }) : undefined
    out.set(name.value, { name: name.value, ...(when ? { when } : {}) })
  })
  return out
}

/**
 * The first allow rule that matches decides a request: an earlier rule without `mcp` that admits a
 * POST to an MCP rule's host and path lets that MCP traffic through undecided. A warning (the
 * earlier rule may be meant, e.g. narrowed by its own match), at the MCP rule.
 */
export function checkMcpShadowing(r: Reader, caps: readonly CCapability[]): void {
  const earlier: { cap: CCapability; rule: CCapability['rules'][number] }[] = []
  for (const cap of caps) {
    for (const rule of cap.rules) {
      if (rule.mcp && rule.methods.has('POST')) {
        const by = earlier.find((e) => !e.rule.mcp && e.rule.methods.has('POST') && overlaps(e.rule, rule))
        if (by) {
          const path = `/${cap.index}/allow/${rule.index}/mcp`
          const node = r.doc.getIn([cap.index, 'allow', rule.index, 'mcp'], true) as Node | undefined
          r.warn('mcp_rule_shadowed', `allow rule "${by.rule.key}" of capability "${by.cap.name}" comes first and admits POSTs to this MCP server's host and path without deciding its messages; put this rule first or narrow that one`, path, node ?? null)
        }
      }
      earlier.push({ cap, rule })
    }
  }
}

/** Whether `e` admits some host and path that the MCP rule `m` names (literal patterns of `m` only, and equal patterns). */
function overlaps(e: CCapability['rules'][number], m: CCapability['rules'][number]): boolean {
  const hostOverlap = m.domainPatterns.some((p) => e.domainPatterns.includes(p) || (!p.includes('*') && e.domains.some((d) => d(p))))
  if (!hostOverlap) return false
  if (!e.paths || !m.paths) return true
  return m.pathPatterns.some((p) => e.pathPatterns.includes(p) || (!p.includes('*') && e.paths!.some((x) => x(p))))
}
