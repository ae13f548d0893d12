// A real gRPC service (@grpc/grpc-js) over TLS from the harness's upstream CA, and a client for it
// that reaches it through the proxy the way grpc-js does on its own: `grpc_proxy` with the token
// as the proxy URL's password (CONNECT with Basic), the corral CA as its root.
import * as grpc from '@grpc/grpc-js'
import * as loader from '@grpc/proto-loader'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { LeafMinter, loadOrCreateCa } from '../../src/proxy/ca.js'
import type { Harness } from './harness.js'

const PROTO = join(fileURLToPath(new URL('.', import.meta.url)), '../fixtures/grpc/notes.proto')

export interface Note { id: string; text: string }
type Unary = (req: { id: string }, meta: grpc.Metadata, cb: (err: grpc.ServiceError | null, note?: Note) => void) => grpc.ClientUnaryCall
export interface NotesClient extends grpc.Client {
  Get: Unary
  Delete: Unary
  List(req: { id: string }): grpc.ClientReadableStream<Note>
}

function notesService(): { service: grpc.ServiceDefinition; Client: new (target: string, creds: grpc.ChannelCredentials, opts?: grpc.ChannelOptions) => NotesClient } {
  const def = loader.loadSync(PROTO, { keepCase: true })
  const pkg = grpc.loadPackageDefinition(def) as unknown as { corraltest: { Notes: grpc.ServiceClientConstructor } }
  return { service: pkg.corraltest.Notes.service, Client: pkg.corraltest.Notes as unknown as new (t: string, c: grpc.ChannelCredentials, o?: grpc.ChannelOptions) => NotesClient }
}

/** The Notes service: `missing` answers NOT_FOUND; every answer carries trailing metadata `x-served-by`. */
export async function startNotesServer(h: Harness): Promise<{ port: number; calls: string[]; close(): Promise<void> }> {
  const minter = new LeafMinter(await loadOrCreateCa(join(h.dir, 'upstream-ca')))
  const pem = await minter.pemFor('127.0.0.1')
  const server = new grpc.Server()
  const calls: string[] = []
  const trailer = (): grpc.Metadata => {
    const m = new grpc.Metadata()
    m.set('x-served-by', 'notes-1')
    return m
  }
  const { service } = notesService()
  server.addService(service, {
    Get: (call: grpc.ServerUnaryCall<{ id: string }, Note>, cb: grpc.sendUnaryData<Note>) => {
      calls.push(`Get ${call.request.id}`)
      if (call.request.id === 'missing') return cb({ code: grpc.status.NOT_FOUND, details: 'no note named missing', metadata: trailer() })
      cb(null, { id: call.request.id, text: `note ${call.request.id}` }, trailer())
    },
    Delete: (call: grpc.ServerUnaryCall<{ id: string }, Note>, cb: grpc.sendUnaryData<Note>) => {
      calls.push(`Delete ${call.request.id}`)
      cb(null, { id: call.request.id, text: 'deleted' })
    },
    List: (call: grpc.ServerWritableStream<{ id: string }, Note>) => {
      calls.push(`List ${call.request.id}`)
      for (let i = 0; i < 3; i++) call.write({ id: String(i), text: `item ${i}` })
      call.end(trailer())
    },
  })
  const creds = grpc.ServerCredentials.createSsl(null, [{ private_key: Buffer.from(pem.key), cert_chain: Buffer.from(pem.cert) }])
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', creds, (err, p) => (err ? reject(err) : resolve(p))))
  return { port, calls, close: () => new Promise<void>((r) => server.tryShutdown(() => r())) }
}

/** A Notes client for `127.0.0.1:port` through the proxy (grpc_proxy for the client's creation only). */
export function notesClientThrough(h: Harness, port: number, token: string): NotesClient {
  const { Client } = notesService()
  const saved = { grpc_proxy: process.env.grpc_proxy, no_grpc_proxy: process.env.no_grpc_proxy, no_proxy: process.env.no_proxy }
  const proxy = new URL(h.proxyUrl)
  process.env.grpc_proxy = `http://corral:${token}@${proxy.host}`
  delete process.env.no_grpc_proxy
  delete process.env.no_proxy
  try {
    return new Client(`127.0.0.1:${port}`, grpc.credentials.createSsl(Buffer.from(h.proxy.ca.certPem)))
  } finally {
    for (const [k, v] of Object.entries(saved)) if (v === undefined) delete process.env[k]; else process.env[k] = v
  }
}

export function unary(fn: Unary, client: NotesClient, id: string): Promise<{ note?: Note; err?: grpc.ServiceError; trailers?: grpc.Metadata }> {
  return new Promise((resolve) => {
    let trailers: grpc.Metadata | undefined
    const call = fn.call(client, { id }, new grpc.Metadata(), (err, note) => setImmediate(() => resolve(err ? { err, ...(trailers ? { trailers } : {}) } : { note: note!, ...(trailers ? { trailers } : {}) })))
    call.on('status', (s: grpc.StatusObject) => (trailers = s.metadata))
  })
}
