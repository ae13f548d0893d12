// Validation and conflict answers the resource routes share, in the envelope's shape: a field
// error names the field in `details.fields`, as schema validation errors do.
import { apiError } from '../contract/index.js'
import { isUniqueViolation } from '../store/index.js'

/** 400 validation_error on one field: `<field> <message>`, with `details.fields[field]`. */
export function fieldError(field: string, message: string) {
  return apiError('validation_error', `${field} ${message}`, { fields: { [field]: message } })
}

/** A racing create that passed the pre-check still meets the unique index: same answer. */
export function duplicateName(name: string, what = 'provider') {
  return (err: unknown): never => {
    if (isUniqueViolation(err)) throw apiError('conflict', `a ${what} named ${name} already exists`, { fields: { name: 'already exists' } })
    throw err
  }
}

export interface ValidationIssue {
  instancePath?: string
  message?: string
  keyword?: string
  params?: Record<string, unknown>
}

/** details.fields from Ajv issues: `{label: 'must NOT have more than 100 characters'}`. */
export function fieldsOf(issues: ValidationIssue[], context: string | undefined): Record<string, string> {
  const fields: Record<string, string> = {}
  for (const issue of issues) {
    let name = (issue.instancePath ?? '').replace(/^\//, '').replaceAll('/', '.')
    if (issue.keyword === 'required' && typeof issue.params?.missingProperty === 'string') {
      name = name ? `${name}.${issue.params.missingProperty}` : issue.params.missingProperty
    } else if (issue.keyword === 'additionalProperties' && typeof issue.params?.additionalProperty === 'string') {
      name = name ? `${name}.${issue.params.additionalProperty}` : issue.params.additionalProperty
      issue.message = 'is not a known field'
    }
    if (!name) name = context ?? 'body'
    fields[name] ??= issue.message ?? 'is invalid'
  }
  return fields
}
