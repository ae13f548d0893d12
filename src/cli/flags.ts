// Flags shared by the API commands, defined once. Global connection flags live in ApiCommand's
// baseFlags; the audit query flags below are reused by `audit query`, `audit stats` and `audit tail`
// and validate their input on parse, so a typo is a usage error (exit 2) before any request is sent.

import * as Flags from '@oclif/core/flags'
import { parseFilter, resolveTime } from '../client/index.js'
import { AUDIT_ORDERS } from '../contract/index.js'

/** Repeatable `--filter col=a,b` / `col!=a,b` / `col!=`; values are kept verbatim for the API. */
export const filter = Flags.custom<string>({
  char: 'f',
  multiple: true,
  helpValue: 'COL=A,B',
  summary: 'Filter on a column: col=a,b (any of), col!=a,b (none of), col!= (populated). Repeatable; ANDed.',
  async parse(input) {
    parseFilter(input)
    return input.trim()
  },
})()

/** `--from` / `--to`: RFC 3339, or a span before now such as 15m, 2h, 7d. Sent as UTC RFC 3339. */
const time = Flags.custom<string>({
  helpValue: 'TIME',
  async parse(input) {
    return resolveTime(input)
  },
})

export const from = time({ summary: 'Lower time bound (RFC 3339, or relative: 15m, 2h, 7d).' })
export const to = time({ summary: 'Upper time bound (RFC 3339, or relative: 15m, 2h, 7d).' })

export const order = Flags.option({
  options: AUDIT_ORDERS,
  summary: 'Sort on (timestamp, id).',
})()

export const limit = Flags.integer({ min: 1, max: 10_000, summary: 'Events per page (server default 100, max 10000).' })

export const cursor = Flags.string({ summary: 'Continue from the cursor printed by a previous page.' })

export const workspace = Flags.string({ char: 'w', helpValue: 'ID', summary: 'Restrict to one workspace.' })

/** The org whose memberships a command manages; defaults to the org saved with the profile. */
export const org = Flags.string({
  env: 'CORRAL_ORG',
  helpValue: 'ORG_ID',
  summary: "Organisation id (default: the credential's own org).",
})

/** The filters, range, order and paging of an audit query (`audit query`, `admin audit query`). */
export const auditQuery = { filter, from, to, order, limit, cursor }
