// The packs client: name resolution (own pack first, ambiguity, unknown names), and the multipart
// request the upload routes receive, read back by a real HTTP server and undici's multipart parser.
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { ApiError, CorralClient } from '../../src/client/index.js'
import { PACK_NAME_RE, packsApi, pickByName, type PackRecord } from '../../src/client/packs.js'
import { json, type LoopbackApi, startLoopbackApi } from './loopback-api.js'

let dir: string
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-packs-client-'))
})
afterEach(() => rmSync(dir, { recursive: true, force: true }))

const pack = (over: Partial<PackRecord>): PackRecord => ({
  id: 'pack_x', name: 'p', display_name: 'p', version: '1', tier: 'community', visibility: 'org', owned: true, ...over,
})

describe('pickByName', () => {
  it('prefers the caller\'s own pack, then a single community pack; several community packs are ambiguous', () => {
    const own = pack({ id: 'pack_own', name: 'tools', owned: true })
    const c1 = pack({ id: 'pack_c1', name: 'tools', owned: false, visibility: 'community' })
    const c2 = pack({ id: 'pack_c2', name: 'tools', owned: false, visibility: 'community' })
    expect(pickByName([c1, own, c2], 'tools').id).toBe('pack_own')
    expect(pickByName([c1], 'tools').id).toBe('pack_c1')
    const ambiguous = (() => { try { pickByName([c1, c2], 'tools') } catch (e) { return e } })() as ApiError
    expect(ambiguous.code).toBe('ambiguous_name')
    expect(ambiguous.message).toContain('pack_c1, pack_c2')
    expect(() => pickByName([c1], 'other')).toThrow(/no pack named other/)
  })
})

describe('packsApi over HTTP', () => {
  let api: LoopbackApi
  beforeEach(async () => {
    api = await startLoopbackApi()
  })
  afterEach(() => api.close())

  it('resolves role packs by name with one list call, keeps ids, and names every unknown pack', async () => {
    api.route('GET /v1/packs', (_req, res) => json(res, 200, { packs: [pack({ id: 'pack_a', name: 'alpha' }), pack({ id: 'pack_b', name: 'beta', owned: false })] }))
    const packs = packsApi(new CorralClient({ apiUrl: api.url, token: 't' }))
    expect(await packs.resolvePackIds(['beta', 'pack_zzz', 'alpha'])).toEqual(['pack_b', 'pack_zzz', 'pack_a'])
    expect(api.requests).toHaveLength(1)
    expect(await packs.resolvePackIds(['pack_only'])).toEqual(['pack_only'])
    expect(api.requests).toHaveLength(1)
    const err = (await packs.resolvePackIds(['alpha', 'ghost', 'gone']).catch((e: unknown) => e)) as ApiError
    expect(err).toBeInstanceOf(ApiError)
    expect(err.envelope).toMatchObject({ code: 'not_found', details: { packs: ['ghost', 'gone'] } })
    expect(err.message).toContain('no pack named ghost, gone')
  })

  it('gets a pack by id directly and sends metadata updates and clones as JSON', async () => {
    api.route('GET /v1/packs/pack_1', (_req, res) => json(res, 200, pack({ id: 'pack_1' })))
    api.route('PUT /v1/packs/pack_1', (req, res) => json(res, 200, pack({ id: 'pack_1', ...(req.body as object) })))
    api.route('POST /v1/packs/pack_1/clone', (req, res) => json(res, 201, pack({ id: 'pack_2', name: (req.body as { name?: string }).name ?? 'p' })))
    const packs = packsApi(new CorralClient({ apiUrl: api.url, token: 't' }))
    expect((await packs.resolvePack('pack_1')).id).toBe('pack_1')
    await expect(packs.resolvePack('not a name')).rejects.toThrow('no pack named not a name')
    expect(api.requests).toHaveLength(1)
    expect(await packs.updatePack('pack_1', { visibility: 'community', category: null })).toMatchObject({ visibility: 'community' })
    expect(api.requests[1].body).toEqual({ visibility: 'community', category: null })
    expect((await packs.clonePack('pack_1', { name: 'mine' })).name).toBe('mine')
    expect(api.requests[2].body).toEqual({ name: 'mine' })
    await packs.clonePack('pack_1')
    expect(api.requests[3].body).toEqual({})
  })
})

describe('packsApi uploads', () => {
  let seen: { method: string; url: string; headers: IncomingHttpHeaders; body: Buffer }[]
  let close: () => Promise<void>
  let url: string
  let status = 201
  beforeEach(async () => {
    seen = []
    status = 201
    const server = createServer(async (req, res) => {
      const chunks: Buffer[] = []
      for await (const c of req) chunks.push(c as Buffer)
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks) })
      res.writeHead(status, { 'content-type': 'application/json' })
      res.end(JSON.stringify(status < 300 ? pack({ id: 'pack_up' }) : { error: { code: 'validation_error', message: 'pack.yaml is missing', request_id: 'req_1' } }))
    })
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    close = () => new Promise((r) => server.close(() => r()))
  })
  afterEach(() => close())

  const form = (i: number) => new Response(seen[i].body, { headers: { 'content-type': String(seen[i].headers['content-type']) } }).formData()

  it('posts the archive and visibility as multipart, and PUTs a re-upload of a file as is', async () => {
    const packs = packsApi(new CorralClient({ apiUrl: url, token: 'crl_t' }))
    const bytes = new Uint8Array([0x1f, 0x8b, 1, 2, 3])
    expect((await packs.uploadPack({ bytes }, { visibility: 'community' })).id).toBe('pack_up')
    expect(seen[0]).toMatchObject({ method: 'POST', url: '/v1/packs/upload' })
    expect(seen[0].headers.authorization).toBe('Bearer crl_t')
    const first = await form(0)
    expect(first.get('visibility')).toBe('community')
    const archive = first.get('archive') as File
    expect(Buffer.from(await archive.arrayBuffer())).toEqual(Buffer.from(bytes))

    writeFileSync(join(dir, 'p.tar.gz'), 'file bytes')
    await packs.reuploadPack('pack_up', { file: join(dir, 'p.tar.gz') })
    expect(seen[1]).toMatchObject({ method: 'PUT', url: '/v1/packs/pack_up/upload' })
    const second = await form(1)
    expect(second.has('visibility')).toBe(false)
    expect(await (second.get('archive') as File).text()).toBe('file bytes')
  })

  it('turns a refused upload into an ApiError with the envelope', async () => {
    status = 400
    const err = (await packsApi(new CorralClient({ apiUrl: url, token: 't' })).uploadPack({ bytes: new Uint8Array([1]) }).catch((e: unknown) => e)) as ApiError
    expect(err).toBeInstanceOf(ApiError)
    expect(err.envelope).toMatchObject({ code: 'validation_error', request_id: 'req_1' })
  })
})

describe('PACK_NAME_RE', () => {
  it('is the server\'s pack name pattern', async () => {
    const { PACK_NAME_PATTERN } = await import('../../src/packs/manifest.js')
    expect(PACK_NAME_RE.source).toBe(PACK_NAME_PATTERN)
  })
})
