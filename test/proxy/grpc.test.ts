// gRPC through the proxy with a real client and a real service (@grpc/grpc-js, a .proto of
// test/fixtures): the client finds the proxy by itself (grpc_proxy), each call is one h2 stream
// with its own row naming the method's path and the grpc-status the client got; trailing metadata
// reaches the client; a method the policy does not allow is answered as a gRPC status the client
// shows (PERMISSION_DENIED, the reason in its message) and never reaches the service.
import * as grpc from '@grpc/grpc-js'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import type { AuditEvent } from '../../src/contract/index.js'
import { onLoopback } from '../helpers/loopback-caps.js'
import { notesClientThrough, startNotesServer, unary, type Note, type NotesClient } from './grpc-service.js'
import { startHarness, type Harness } from './harness.js'

const CAPS = `
- name: notes
  type: http
  allow:
    - name: read
      domains: ["127.0.0.1"]
      methods: [POST]
      paths: ["/corraltest.Notes/Get", "/corraltest.Notes/List"]
`

describe('gRPC through the proxy', () => {
  let h: Harness
  let svc: Awaited<ReturnType<typeof startNotesServer>>
  let client: NotesClient
  let before = 0
  const rows = async (n = 1): Promise<AuditEvent[]> => (await h.audit.waitForDecisions(before + n)).slice(before)

  beforeAll(async () => {
    h = await startHarness()
    svc = await startNotesServer(h)
    const { token } = await h.workspace(onLoopback(CAPS, svc.port), 'idle', { raw: true })
    client = notesClientThrough(h, svc.port, token)
  })
  afterAll(async () => {
    client?.close()
    await svc?.close()
    await h?.close()
  })
  beforeEach(() => {
    before = h.audit.decisions().length
  })

  it('an allowed unary call: the answer, its trailing metadata, and an allow row with grpc_status 0', async () => {
    const out = await unary(client.Get, client, 'n1')
    expect(out.err).toBeUndefined()
    expect(out.note).toEqual({ id: 'n1', text: 'note n1' })
    expect(out.trailers?.get('x-served-by')).toEqual(['notes-1'])
    const [row] = await rows()
    expect(row).toMatchObject({ decision: 'allow', method: 'POST', path: '/corraltest.Notes/Get', capability_name: 'notes', detail: { protocol: 'h2', upstream_status: 200, grpc_status: 0, response_complete: true } })
  })

  it("the service's own error status reaches the client and the row (allowed, grpc_status 5 with its message)", async () => {
    const out = await unary(client.Get, client, 'missing')
    expect(out.err?.code).toBe(grpc.status.NOT_FOUND)
    expect(out.err?.details).toBe('no note named missing')
    const [row] = await rows()
    expect(row).toMatchObject({ decision: 'allow', detail: { grpc_status: 5, grpc_message: 'no note named missing' } })
  })

  it('a server stream relays every message, then its status', async () => {
    const notes: Note[] = []
    const status = await new Promise<grpc.StatusObject>((resolve, reject) => {
      const call = client.List({ id: 'all' })
      call.on('data', (n: Note) => notes.push(n))
      call.on('status', resolve)
      call.on('error', (e: grpc.ServiceError) => (e.code === grpc.status.OK ? undefined : reject(e)))
    })
    expect(notes.map((n) => n.text)).toEqual(['item 0', 'item 1', 'item 2'])
    expect(status.code).toBe(grpc.status.OK)
    expect(status.metadata.get('x-served-by')).toEqual(['notes-1'])
    expect((await rows())[0]).toMatchObject({ decision: 'allow', path: '/corraltest.Notes/List', detail: { grpc_status: 0 } })
  })

  it('a method the policy does not allow: PERMISSION_DENIED naming the reason, a deny row, the service never called', async () => {
    const calls = svc.calls.length
    const out = await unary(client.Delete, client, 'n1')
    expect(out.err?.code).toBe(grpc.status.PERMISSION_DENIED)
    expect(out.err?.details).toMatch(/^corral policy denied \(no_match\): /)
    expect(svc.calls.length).toBe(calls)
    const [row] = await rows()
    expect(row).toMatchObject({ decision: 'deny', reason: 'no_match', path: '/corraltest.Notes/Delete', detail: { protocol: 'h2', grpc_status: 7 } })
    expect(String(row!.detail!.grpc_message)).toMatch(/no_match/)
    // The channel stays usable after a deny.
    expect((await unary(client.Get, client, 'n2')).note?.id).toBe('n2')
  })
})
