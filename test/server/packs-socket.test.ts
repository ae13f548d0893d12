// Pack uploads over a real socket: a refusal found early in a large upload still reaches the
// client as the error envelope (the rest of the body is read and dropped, not cut mid-send), and
// an over-limit upload is answered with 413 as soon as it passes the limit, the rest of its body
// dropped on a connection that stays open.
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PackContent } from '../../src/packs/content.js'
import { tgzOf } from '../packs/archives.js'
import { createHarness, type Harness } from './harness.js'

describe('pack upload over a socket', () => {
  let h: Harness
  let url: string
  let token: string
  const root = mkdtempSync(join(tmpdir(), 'corral-pack-socket-'))
  beforeAll(async () => {
    h = await createHarness()
    h.deps.packContent = new PackContent(root, { maxCompressedBytes: 8 * 1024 * 1024, maxUncompressedBytes: 64 * 1024 * 1024, maxEntries: 100 })
    await h.app.listen({ host: '127.0.0.1', port: 0 })
    const addr = h.app.server.address() as { port: number }
    url = `http://127.0.0.1:${addr.port}`
    token = (await h.newOrg()).ownerKey
  })
  afterAll(async () => {
    await h.close()
    rmSync(root, { recursive: true, force: true })
  })

  const send = async (archive: Buffer) => {
    const form = new FormData()
    form.append('archive', new Blob([archive]), 'p.tgz')
    const res = await fetch(`${url}/v1/packs/upload`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form })
    return { status: res.status, body: (await res.json()) as { error?: { code: string; message: string } } }
  }

  it('answers an early refusal of a large upload with the envelope', async () => {
    // The first entry is refused; megabytes of incompressible data follow it.
    const archive = await tgzOf([{ name: '/abs', body: 'x' }, { name: 'noise', body: randomBytes(6 * 1024 * 1024) }])
    const res = await send(archive)
    expect(res.status).toBe(400)
    expect(res.body.error?.message).toMatch(/absolute path/)
  })

  it('answers a refusal decided before the body is read (re-upload of a missing pack) with the envelope', async () => {
    const form = new FormData()
    form.append('archive', new Blob([await tgzOf([{ name: 'pack.yaml', body: 'name: a\nversion: "1"\n' }, { name: 'noise', body: randomBytes(6 * 1024 * 1024) }])]), 'p.tgz')
    const res = await fetch(`${url}/v1/packs/pack_missing/upload`, { method: 'PUT', headers: { authorization: `Bearer ${token}` }, body: form })
    expect(res.status).toBe(404)
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found')
  })

  it('cleans up after a client that disconnects mid-upload, and keeps serving', async () => {
    const archive = await tgzOf([{ name: 'pack.yaml', body: 'name: gone\nversion: "1"\n' }, { name: 'noise', body: randomBytes(2 * 1024 * 1024) }])
    const boundary = 'corralboundary'
    const head = `--${boundary}\r\ncontent-disposition: form-data; name="archive"; filename="a.tgz"\r\ncontent-type: application/gzip\r\n\r\n`
    const length = Buffer.byteLength(head) + archive.length + Buffer.byteLength(`\r\n--${boundary}--\r\n`)
    const socket = connect(Number(new URL(url).port), '127.0.0.1')
    await new Promise((resolve) => socket.once('connect', resolve))
    socket.write(`POST /v1/packs/upload HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\ncontent-type: multipart/form-data; boundary=${boundary}\r\ncontent-length: ${length}\r\n\r\n${head}`)
    socket.write(archive.subarray(0, archive.length / 2))
    // Disconnect only once the ingest is under way (its scratch tree exists), else nothing is tested.
    const ingesting = () => readdirSync(root).some((n) => n.startsWith('.ingest-'))
    for (let i = 0; i < 200 && !ingesting(); i++) await new Promise((resolve) => setTimeout(resolve, 50))
    expect(ingesting()).toBe(true)
    socket.destroy()
    // The ingest notices, removes its temporary tree, and the server answers the next request.
    for (let i = 0; i < 100 && ingesting(); i++) await new Promise((resolve) => setTimeout(resolve, 100))
    expect(readdirSync(root).filter((n) => n.startsWith('.ingest-'))).toEqual([])
    const next = await send(await tgzOf([{ name: 'pack.yaml', body: 'name: after\nversion: "1"\n' }]))
    expect(next.status).toBe(201)
  })

  it('answers 413 for an upload over the limit', async () => {
    const res = await send(await tgzOf([{ name: 'pack.yaml', body: 'name: a\nversion: "1"\n' }, { name: 'noise', body: randomBytes(10 * 1024 * 1024) }]))
    expect(res.status).toBe(413)
    expect(res.body.error?.code).toBe('payload_too_large')
  })

  it('answers 413 as soon as the archive passes the limit, drops the rest of the body and keeps the connection', async () => {
    const archive = await tgzOf([{ name: 'pack.yaml', body: 'name: big\nversion: "1"\n' }, { name: 'noise', body: randomBytes(10 * 1024 * 1024) }])
    const boundary = 'corralboundary'
    const head = `--${boundary}\r\ncontent-disposition: form-data; name="archive"; filename="a.tgz"\r\ncontent-type: application/gzip\r\n\r\n`
    const tail = `\r\n--${boundary}--\r\n`
    const length = Buffer.byteLength(head) + archive.length + Buffer.byteLength(tail)
    const socket = connect(Number(new URL(url).port), '127.0.0.1')
    await new Promise((resolve) => socket.once('connect', resolve))
    let received = ''
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')))
    const closed = new Promise((resolve) => socket.once('close', resolve))
    socket.on('error', () => {}) // a reset fails the write that meets it
    const response = async (): Promise<{ status: number; body: string }> => {
      for (let i = 0; i < 200; i++) {
        const end = received.indexOf('\r\n\r\n')
        const size = /content-length: (\d+)/i.exec(received)
        if (end >= 0 && size && received.length >= end + 4 + Number(size[1])) {
          const out = { status: Number(received.slice(9, 12)), body: received.slice(end + 4, end + 4 + Number(size[1])) }
          received = received.slice(end + 4 + Number(size[1]))
          return out
        }
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      throw new Error(`no complete response (got ${JSON.stringify(received.slice(0, 200))})`)
    }
    const write = (data: string | Buffer) => new Promise<void>((resolve, reject) => socket.write(data, (err) => (err ? reject(err) : resolve())))

    // 9 MiB of the archive, past the 8 MiB limit: the answer comes with the body not yet sent.
    await write(`POST /v1/packs/upload HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\ncontent-type: multipart/form-data; boundary=${boundary}\r\ncontent-length: ${length}\r\n\r\n${head}`)
    await write(archive.subarray(0, 9 * 1024 * 1024))
    const refused = await response()
    expect(refused.status).toBe(413)
    expect((JSON.parse(refused.body) as { error: { code: string } }).error.code).toBe('payload_too_large')
    expect(received).toBe('')

    // The rest is read and dropped; the same connection then serves the next request.
    await write(archive.subarray(9 * 1024 * 1024))
    await write(tail)
    await write(`GET /v1/packs HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${token}\r\n\r\n`)
    const next = await response()
    expect(next.status).toBe(200)
    socket.end()
    await closed
  })
})
