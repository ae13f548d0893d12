import { describe, expect, it } from 'vitest'
import { normalizeError } from '../../src/cli/base-command.js'
import { CliError, FindingsExit, UsageError } from '../../src/cli/errors.js'

describe('normalizeError', () => {
  it('maps usage errors to exit 2', () => {
    const n = normalizeError(new UsageError('missing --label'))
    expect(n).toMatchObject({ exitCode: 2, silent: false, line: 'missing --label', envelope: { code: 'usage_error' } })
  })

  it('maps plain failures to exit 1 with their code', () => {
    const n = normalizeError(new CliError('profile "x" not found', 'profile_not_found'))
    expect(n).toMatchObject({ exitCode: 1, envelope: { code: 'profile_not_found' } })
  })

  it('keeps an API envelope whole and names the request id on the line', () => {
    const err = Object.assign(new Error('denied'), {
      envelope: { code: 'permission_denied', message: 'caller lacks apikeys:write', request_id: 'req_1' },
    })
    const n = normalizeError(err)
    expect(n.exitCode).toBe(1)
    expect(n.line).toBe('caller lacks apikeys:write [permission_denied] (request req_1)')
    expect(n.envelope.request_id).toBe('req_1')
  })

  it('exits 1 silently for findings', () => {
    expect(normalizeError(new FindingsExit())).toMatchObject({ exitCode: 1, silent: true })
  })

  it('treats unknown errors as internal failures', () => {
    expect(normalizeError(new Error('boom'))).toMatchObject({ exitCode: 1, envelope: { code: 'internal_error', message: 'boom' } })
  })
})
