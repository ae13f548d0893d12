// `corral audit export --format jsonl|csv|ocsf` through the built binary against a real serve, and
// serve shipping its audit log to an OTLP receiver configured by CORRAL_AUDIT_OTLP_ENDPOINT.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Ajv } from 'ajv'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createAuditWriter } from '../../src/audit/index.js'
import type { AuditEvent } from '../../src/contract/index.js'
import { openStore } from '../../src/store/index.js'
import { decision } from '../audit/fixtures.js'
import { OCSF_EVENT_SCHEMA } from '../audit/ocsf-schema.js'
import { OtlpReceiver } from '../audit/otlp-receiver.js'
import { startStack, type Stack } from '../helpers/serve.js'

/** RFC 4180 records (quoted fields with "" escapes and line breaks), to read what a spreadsheet would. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = []
  let row: string[] = []
  let cell = ''
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (cell += '"'), i++
      else if (c === '"') quoted = false
      else cell += c
    } else if (c === '"') quoted = true
    else if (c === ',') row.push(cell), (cell = '')
    else if (c === '\r' && text[i + 1] === '\n') row.push(cell), rows.push(row), (row = []), (cell = ''), i++
    else cell += c
  }
  return rows
}

const HOSTILE = {
  path: "=cmd|' /C calc'!A0",
  agent_role: '+SUM(1,2)',
  capability_name: '@evil, "quoted"\nline',
  destination: '-2+3.example.com',
  method: '\t=1',
}

describe('corral audit export and the OTLP sink (the binary)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-audit-export-'))
  const db = `sqlite:${join(dir, 'corral.db')}`
  let stack: Stack
  let receiver: OtlpReceiver
  let org: string
  let rows: AuditEvent[]

  beforeAll(async () => {
    receiver = await OtlpReceiver.start()
    stack = await startStack({
      runtime: 'process', db,
      env: { CORRAL_AUDIT_OTLP_ENDPOINT: `http://127.0.0.1:${receiver.port}`, CORRAL_AUDIT_OTLP_HEADERS: 'x-tenant=corral%20e2e', CORRAL_DEPLOYMENT: 'e2e' },
    })
    const first = await stack.corral(['audit', 'query', '--json', '--limit', '1'])
    org = (JSON.parse(first.stdout) as { events: AuditEvent[] }).events[0]!.org_id
    const store = await openStore(db)
    const writer = createAuditWriter(store)
    await writer.emit(decision(org, { ...HOSTILE, decision: 'deny', reason: 'no_match' }))
    for (let i = 0; i < 30; i++) await writer.emit(decision(org, { path: `/p/${i}` }))
    await writer.close()
    await store.close()
    const all = await stack.corral(['audit', 'query', '--all', '--json', '--order', 'asc'])
    expect(all.code, all.stderr).toBe(0)
    rows = all.stdout.trim().split('\n').map((l) => JSON.parse(l) as AuditEvent)
  }, 120_000)
  afterAll(async () => {
    await stack?.close()
    await receiver?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('jsonl: every row, oldest first, exactly as the API returns it (a round trip)', async () => {
    const out = join(dir, 'audit.jsonl')
    const r = await stack.corral(['audit', 'export', '--format', 'jsonl', '--out', out, '--limit', '7'])
    expect(r.code, r.stderr).toBe(0)
    expect(r.stderr).toMatch(new RegExp(`${rows.length} events exported as jsonl`))
    const lines = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as AuditEvent)
    expect(lines).toEqual(rows)
  })

  it('csv: the spec columns; hostile cells are neutralised with an apostrophe, quotes, commas and line breaks survive', async () => {
    const r = await stack.corral(['audit', 'export', '--format', 'csv', '--filter', 'decision=deny'])
    expect(r.code, r.stderr).toBe(0)
    const [header, ...records] = parseCsv(r.stdout)
    expect(header!.slice(0, 5)).toEqual(['id', 'org_id', 'user_id', 'timestamp', 'event_type'])
    expect(records).toHaveLength(1)
    const cell = (name: string) => records[0]![header!.indexOf(name)]
    expect(cell('path')).toBe(`'${HOSTILE.path}`)
    expect(cell('agent_role')).toBe(`'${HOSTILE.agent_role}`)
    expect(cell('capability_name')).toBe(`'${HOSTILE.capability_name}`)
    expect(cell('destination')).toBe(`'${HOSTILE.destination}`)
    expect(cell('method')).toBe(`'${HOSTILE.method}`)
    expect(cell('latency_ms')).toBe('12')
    expect(JSON.parse(cell('debits')!)).toEqual({ tokens: 10 })
    for (const rec of records) for (const c of rec) expect(c).not.toMatch(/^[=+\-@\t\r]/)
  })

  it('ocsf: one OCSF event per row, valid against its class schema, metadata.uid the row id', async () => {
    const r = await stack.corral(['audit', 'export', '--format', 'ocsf'])
    expect(r.code, r.stderr).toBe(0)
    const events = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { metadata: { uid: string }; class_uid: number })
    const validate = new Ajv({ strict: false }).compile(OCSF_EVENT_SCHEMA)
    for (const e of events) expect(validate(e), JSON.stringify(validate.errors)).toBe(true)
    expect(events.map((e) => e.metadata.uid)).toEqual(rows.map((e) => e.id))
    expect(events.find((e) => e.metadata.uid === rows.find((x) => x.decision === 'deny')!.id)).toMatchObject({ class_uid: 4002, action_id: 2 })
  })

  it('a bad format or an unwritable --out is one error line and a non-zero exit', async () => {
    const bad = await stack.corral(['audit', 'export', '--format', 'xml'])
    expect(bad.code).not.toBe(0)
    const out = await stack.corral(['audit', 'export', '--format', 'jsonl', '--out', join(dir, 'missing', 'x.jsonl')])
    expect(out.code).not.toBe(0)
    expect(out.stderr).toMatch(/cannot write .*ENOENT/)
  })

  it('serve ships every row of the log to the OTLP receiver once, with its resource attributes', async () => {
    await stack.until(async () => rows.every((r) => receiver.ids().includes(r.id)), 'every row at the receiver', 30_000)
    const ids = receiver.records.map((r) => String(r.attributes['corral.audit.event_id']))
    expect(new Set(ids).size).toBe(ids.length)
    const mine = receiver.records.find((r) => r.attributes['corral.audit.event_id'] === rows[0]!.id)!
    expect(mine.resource).toMatchObject({ 'service.name': 'corral', 'corral.org_id': org, 'corral.audit.scope': 'org', 'deployment.environment.name': 'e2e' })
    expect(String(mine.resource['service.instance.id'])).toMatch(/\S/)
  })
})
