import { describe, expect, it } from 'vitest'
import { normalizeError, usageLine } from '../../src/cli/base-command.js'
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

describe('usageLine', () => {
  // The real parser's errors, so a change in oclif's wording shows up here.
  const parse = async (argv: string[]) => {
    const { Parser } = await import('@oclif/core')
    const Flags = await import('@oclif/core/flags')
    const Args = await import('@oclif/core/args')
    try {
      await Parser.parse(argv, {
        flags: { label: Flags.string({ required: true }), limit: Flags.integer(), a: Flags.string({ exclusive: ['b'] }), b: Flags.string() },
        args: { id: Args.string({ required: true }) },
      })
    } catch (error) {
      return usageLine(error)
    }
    throw new Error('parsed')
  }

  it('names the missing flag and argument, and drops oclif\'s wrapping lines', async () => {
    expect(await parse(['x'])).toBe('Missing required flag --label')
    expect(await parse(['--label', 'l'])).toBe('Missing required argument ID')
    expect(await parse(['x', '--label', 'l', '--limit', 'z'])).toBe('Parsing --limit: Expected an integer but received: z')
    expect(await parse(['x', '--label', 'l', '--nope'])).toBe('Nonexistent flag: --nope')
    expect(await parse(['x', 'y', '--label', 'l'])).toBe('Unexpected argument: y')
    expect(await parse(['x', '--label', 'l', '--a', '1', '--b', '2'])).toMatch(/^--b=2 cannot also be provided when using --a$/)
  })
})
