// Applying one transform's value to the request being built (policy.ts #applyOne): where each
// kind puts its value, and the secrets a transform's CEL may read.
import type { TransformFailure } from '../contract/index.js'
import { celToJson, isCelMap } from './cel.js'
import type { CTransform } from './model.js'
import { deepMerge, setQuery } from './request-vars.js'
import type { TransformInput, TransformOutput } from './types.js'

/** The named secrets for one evaluation, or why they cannot be had. */
export function secretsFor(keys: readonly string[], input: TransformInput): Record<string, string> | TransformFailure {
  // Withheld like credentials when the request may not go where the policy looked.
  if (input.secretsAllowed === false) return 'auth_unavailable'
  const secrets: Record<string, string> = {}
  let missing = false
  for (const k of keys) {
    let s: string | undefined
    try {
      s = input.secrets(k)
    } catch {
      s = undefined
    }
    if (s === undefined) missing = true
    else secrets[k] = s
  }
  return missing ? 'apply_error' : secrets
}

/** Puts a transform's value where its kind says; a failure reason when it cannot. */
export function placeValue(t: CTransform, value: unknown, out: TransformOutput): TransformFailure | undefined {
  const headers = out.headers
  switch (t.kind) {
    case 'header':
      if (t.action === 'remove') delete headers[t.header]
      else if (typeof value !== 'string') {
        return 'type_mismatch'
      } else if (t.action === 'set') headers[t.header] = [value]
      else (headers[t.header] ??= []).push(value)
      break
    case 'query':
      if (t.action === 'remove') out.rawQuery = setQuery(out.rawQuery, t.param, undefined)
      else if (typeof value !== 'string') {
        return 'type_mismatch'
      } else out.rawQuery = setQuery(out.rawQuery, t.param, value)
      break
    case 'path': {
      if (typeof value !== 'string') {
        return 'type_mismatch'
      }
      const s = value
      const next = t.action === 'prefix' ? s + out.path : t.pattern!.replace(out.path, () => s)
      if (!next.startsWith('/')) {
        return 'apply_error'
      }
      out.path = next
      break
    }
    case 'body': {
      const doc = out.json
      if (t.action === 'merge') {
        if (!isCelMap(value)) {
          return 'type_mismatch'
        }
        if (!doc || typeof doc !== 'object' || Array.isArray(doc)) {
          return 'apply_error'
        }
        out.json = deepMerge(doc, celToJson(value) as Record<string, unknown>)
      } else {
        if (typeof value !== 'string') {
          return 'type_mismatch'
        }
        if (!doc || typeof doc !== 'object' || Array.isArray(doc)) {
          return 'apply_error'
        }
        const current = (doc as Record<string, unknown>)[t.field!]
        if (current !== undefined && typeof current !== 'string') {
          return 'apply_error'
        }
        out.json = { ...(doc as Record<string, unknown>), [t.field!]: value + (current ?? '') }
      }
      out.bodyChanged = true
      break
    }
  }
  return undefined
}
