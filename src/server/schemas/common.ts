// JSON schemas shared by routes. Response schemas double as the leak guard: a column that is not
// listed here (a hash, a secret) is never serialised.

export const dateTime = { type: 'string', format: 'date-time' } as const

export const idParams = {
  type: 'object',
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 200 } },
} as const

export const statusOnly = (value: string) =>
  ({ type: 'object', required: ['status'], properties: { status: { type: 'string', enum: [value] } } }) as const

/** Same grammar as capability names (spec Limits): letter first, then letters, digits, `_` and `-`. */
export const NAME_SCHEMA = { type: 'string', pattern: '^[A-Za-z][A-Za-z0-9_-]{0,63}$' } as const
