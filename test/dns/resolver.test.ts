// The workspace resolver on its own: what it answers, its limits, and that one workspace's
// resolver shares nothing with another's.
import dnsPacket from 'dns-packet'
import { describe, expect, it } from 'vitest'
import { WorkspaceResolver, isSynthetic, lookupName, type LookupHooks } from '../../src/dns/index.js'

const query = (name: string, type = 'A', id = 7) => dnsPacket.encode({ type: 'query', id, flags: dnsPacket.RECURSION_DESIRED, questions: [{ name, type: type as 'A', class: 'IN' }] })
const decode = (b: Buffer | undefined) => dnsPacket.decode(b!) as dnsPacket.DecodedPacket & { rcode: string }

function hooks(allowed: string[] = []): LookupHooks & { rows: string[] } {
  const rows: string[] = []
  return {
    rows,
    decide: (name) => (allowed.includes(name) ? { allowed: true, capability: 'cap' } : { allowed: false }),
    allowed: async (name) => { rows.push(name) },
  }
}

describe('WorkspaceResolver', () => {
  it('answers A from the synthetic range, one address per name, and asks the hooks for a row only when allowed', async () => {
    const r = new WorkspaceResolver()
    const h = hooks(['api.example.com'])
    const a = decode((await r.answer(query('api.example.com'), h)).reply)
    expect(a.id).toBe(7)
    expect(a.rcode).toBe('NOERROR')
    const address = (a.answers![0] as { data: string }).data
    expect(isSynthetic(address)).toBe(true)
    expect(r.table.nameOf(address)).toBe('api.example.com')
    const denied = decode((await r.answer(query('other.example.com'), h)).reply)
    expect((denied.answers![0] as { data: string }).data).not.toBe(address)
    expect(h.rows).toEqual(['api.example.com'])
  })

  it('keeps at most maxNames names: a new name past it gets SERVFAIL, held names still answer', async () => {
    const r = new WorkspaceResolver({ queriesPerSecond: 1000, burst: 1000, maxNames: 3, ttlS: 5 })
    for (const n of ['a.dev', 'b.dev', 'c.dev']) expect(decode((await r.answer(query(n), hooks())).reply).rcode).toBe('NOERROR')
    expect(decode((await r.answer(query('d.dev'), hooks())).reply).rcode).toBe('SERVFAIL')
    expect(decode((await r.answer(query('a.dev'), hooks())).reply).answers![0]).toMatchObject({ ttl: 5 })
  })

  it('refuses past its query rate, per workspace', async () => {
    const r = new WorkspaceResolver({ queriesPerSecond: 1, burst: 5, maxNames: 100, ttlS: 5 })
    const other = new WorkspaceResolver({ queriesPerSecond: 1, burst: 5, maxNames: 100, ttlS: 5 })
    const codes: string[] = []
    for (let i = 0; i < 10; i++) codes.push(decode((await r.answer(query(`n${i}.dev`), hooks())).reply).rcode)
    expect(codes.filter((c) => c === 'REFUSED').length).toBeGreaterThanOrEqual(4)
    expect(decode((await other.answer(query('n0.dev'), hooks())).reply).rcode).toBe('NOERROR')
  })

  it('drops what is not a query and answers FORMERR to a readable header', async () => {
    const r = new WorkspaceResolver()
    expect((await r.answer(Buffer.from('hi'), hooks())).reply).toBeUndefined()
    const garbage = Buffer.alloc(20, 0xff)
    garbage.writeUInt16BE(99, 0)
    garbage[2] = 0x01 // a query (QR clear) whose body does not parse
    const out = await r.answer(garbage, hooks())
    if (out.reply) expect(decode(out.reply).id).toBe(99)
    const response = dnsPacket.encode({ type: 'response', id: 1, questions: [{ name: 'a.dev', type: 'A' }] })
    expect((await r.answer(response, hooks())).outcome).toBe('dropped')
  })

  it('gives no answer without its row: a refused row turns an allowed lookup into SERVFAIL', async () => {
    const r = new WorkspaceResolver()
    const failing: LookupHooks = { decide: () => ({ allowed: true, capability: 'cap' }), allowed: async () => { throw new Error('audit down') } }
    const out = await r.answer(query('api.example.com'), failing)
    expect(out.outcome).toBe('row_refused')
    expect(decode(out.reply)).toMatchObject({ rcode: 'SERVFAIL', answers: [] })
  })

  it('names that cannot exist', () => {
    for (const n of ['', 'intranet', 'a..b', '-x.dev', 'x.invalid', 'printer.local', 'app.localhost', '1.2.3.4', `${'a'.repeat(64)}.dev`]) expect(lookupName(n), n).toBeUndefined()
    expect(lookupName('API.Example.COM.')).toBe('api.example.com')
  })
})
