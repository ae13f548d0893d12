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
