// A misbehaving registry: a small HTTP server speaking just enough of the distribution wire
// format to give malformed answers (a bad token realm, a token response that is not JSON, bad
// Location headers, manifests that are JSON but not objects). Every one must come out of the
// client as RegistryError('invalid'), which the routes answer as a 400 on image_ref — never as a
// TypeError (a 500). A fake is the point here: a real registry does not answer like this.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { OCI_INDEX, OCI_MANIFEST, RegistryClient, RegistryError, bufferBody, parseImageRef } from '../../src/packs/registry.js'

type Handler = (req: IncomingMessage, res: ServerResponse) => void

describe('a registry giving malformed answers', () => {
  let server: Server
  let host: string
  let handler: Handler = (_req, res) => res.writeHead(500).end()

  beforeAll(async () => {
    server = createServer((req, res) => handler(req, res))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    host = `127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))

  const ref = () => parseImageRef(`${host}/ns/org/pack:1.0.0`)

  async function invalid(p: Promise<unknown>, message: RegExp): Promise<void> {
    const err = await p.then(() => undefined, (e: unknown) => e)
    expect(err).toBeInstanceOf(RegistryError)
    expect((err as RegistryError).kind).toBe('invalid')
    expect((err as RegistryError).message).toMatch(message)
  }

  it('a Bearer challenge whose realm is not a URL', async () => {
    handler = (_req, res) => res.writeHead(401, { 'www-authenticate': 'Bearer realm="::not a url",service="x"' }).end()
    await invalid(new RegistryClient().getManifest(ref()), /token realm/)
  })

  it.each([
    ['not JSON', 'this is not json'],
    ['JSON null', 'null'],
    ['a JSON string', '"token"'],
  ])('a token response that is %s', async (_what, body) => {
    handler = (req, res) => {
      if (req.url?.startsWith('/token')) return res.writeHead(200, { 'content-type': 'application/json' }).end(body)
      res.writeHead(401, { 'www-authenticate': `Bearer realm="http://${host}/token",service="fake"` }).end()
    }
    await invalid(new RegistryClient().getManifest(ref()), /token/)
  })

  it.each([
    ['null', 'null', OCI_MANIFEST],
    ['a number', '42', OCI_MANIFEST],
    ['an array', '[{"schemaVersion":2}]', OCI_MANIFEST],
    ['a string', '"manifest"', OCI_MANIFEST],
    ['null (served as an index)', 'null', OCI_INDEX],
  ])('a manifest body that is %s', async (_what, body, type) => {
    handler = (_req, res) => res.writeHead(200, { 'content-type': type }).end(body)
    await invalid(new RegistryClient().getManifest(ref()), /not a JSON object/)
  })

  it('an index whose chosen entry is null or not an object', async () => {
    handler = (_req, res) => res.writeHead(200, { 'content-type': OCI_INDEX }).end(JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: [null, 7, 'x'] }))
    await invalid(new RegistryClient().getManifest(ref()), /index/)
  })

  it('a redirect whose Location is not a URL', async () => {
    handler = (_req, res) => res.writeHead(307, { location: 'http://[not-a-host' }).end()
    await invalid(new RegistryClient().getManifest(ref()), /Location/)
  })

  it('an upload started with a Location that is not a URL', async () => {
    handler = (req, res) => {
      if (req.method === 'HEAD') return res.writeHead(404).end()
      if (req.method === 'POST') return res.writeHead(202, { location: 'http://[not-a-host/upload' }).end()
      res.writeHead(500).end()
    }
    const bytes = Buffer.from('blob')
    await invalid(new RegistryClient().pushBlob(ref(), { digest: `sha256:${'0'.repeat(64)}`, size: bytes.length }, bufferBody(bytes)), /Location/)
  })
})
