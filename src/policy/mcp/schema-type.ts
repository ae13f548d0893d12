// An MCP tool's inputSchema as CEL types: the `args` of a tool's condition is typed from the
// schema the policy declares, so `caps lint` rejects a field the schema does not have or a literal
// of the wrong type compared with a field. What a JSON Schema says that CEL's types cannot (unions,
// anyOf/oneOf, $ref, enums, patterns) is typed `dyn`; ajv still validates the whole schema before
// any condition runs (docs/policy.md "MCP servers").
import type { CelDeclarations } from '../cel.js'

/** How JSON values of one schema node become CEL values at run time. */
type Convert = (v: unknown) => unknown

interface Typed {
  type: string
  convert?: Convert
}

const MAX_TYPES = 200

/** The CEL declarations for `args` (and the converter from JSON arguments to the values CEL expects). */
export interface ArgsTyping {
  declarations: CelDeclarations
  convert: Convert
}

/** Types `args` from an inputSchema; without one, `args` is `map<string, dyn>` (dynamic JSON). */
export function argsTyping(schema: unknown, key: string): ArgsTyping {
  const types: { name: string; fields: Record<string, string> }[] = []
  const root = schema === undefined ? { type: 'map<string, dyn>' } : typeOf(schema, 'Args', types, 0)
  // A root that is not an object (the MCP spec requires `type: object`) is still typed as given.
  const vars = { args: root.type, tool: 'string' }
  return {
    declarations: { key: `${key}:${JSON.stringify(types)}:${root.type}`, types, vars },
    convert: root.convert ?? identity,
  }
}

function identity(v: unknown): unknown {
  return v
}

function typeOf(schema: unknown, name: string, types: { name: string; fields: Record<string, string> }[], depth: number): Typed {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema) || depth > 16 || types.length >= MAX_TYPES) return { type: 'dyn' }
  const s = schema as Record<string, unknown>
  if ('$ref' in s || 'anyOf' in s || 'oneOf' in s || 'allOf' in s || 'not' in s || 'if' in s) return { type: 'dyn' }
  switch (s.type) {
    case 'string':
      return { type: 'string' }
    case 'boolean':
      return { type: 'bool' }
    case 'number':
      return { type: 'double', convert: toDouble }
    case 'integer':
      // JSON integers arrive as JS numbers; CEL's int is a bigint (ajv has checked the value is whole).
      return { type: 'int', convert: toInt }
    case 'array': {
      const item = typeOf(s.items, `${name}_item`, types, depth + 1)
      const c = item.convert
      return { type: `list<${item.type}>`, ...(c ? { convert: (v) => (Array.isArray(v) ? v.map(c) : v) } : {}) }
    }
    case 'object':
      return objectType(s, name, types, depth)
    default:
      return { type: 'dyn' }
  }
}

/** An object with `properties` is a CEL object type (unknown fields are type errors); one without is a map. */
function objectType(s: Record<string, unknown>, name: string, types: { name: string; fields: Record<string, string> }[], depth: number): Typed {
  const props = s.properties
  if (!props || typeof props !== 'object' || Array.isArray(props) || Object.keys(props).length === 0) {
    const extra = s.additionalProperties
    const value = extra && typeof extra === 'object' ? typeOf(extra, `${name}_value`, types, depth + 1) : { type: 'dyn' }
    const c = value.convert
    return { type: `map<string, ${value.type}>`, ...(c ? { convert: (v) => mapValues(v, c) } : {}) }
  }
  const fields: Record<string, string> = {}
  const converts: [string, Convert][] = []
  let i = 0
  for (const [field, sub] of Object.entries(props as Record<string, unknown>)) {
    const t = typeOf(sub, `${name}_${i++}`, types, depth + 1)
    fields[field] = t.type
    if (t.convert) converts.push([field, t.convert])
  }
  // After the types of its fields: the engine resolves a field's type when the object type is registered.
  types.push({ name, fields })
  if (converts.length === 0) return { type: name }
  return {
    type: name,
    convert: (v) => {
      if (!v || typeof v !== 'object' || Array.isArray(v)) return v
      const out: Record<string, unknown> = { ...(v as Record<string, unknown>) }
      for (const [f, c] of converts) if (Object.hasOwn(out, f)) out[f] = c(out[f])
      return out
    },
  }
}

function mapValues(v: unknown, c: Convert): unknown {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return v
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, c(x)]))
}

function toInt(v: unknown): unknown {
  return typeof v === 'number' && Number.isSafeInteger(v) ? BigInt(v) : v
}

function toDouble(v: unknown): unknown {
  return v
}
