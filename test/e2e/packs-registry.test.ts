// Registry packs as a user drives them (node bin/run.js) against a real `corral serve` configured
// with a real registry (docker-registry): an upload pushes the pack's image and records image_ref;
// `pack create --image-ref` makes a pack from that image with the same digest; `pack update
// --image-ref` re-pulls; a missing tag and an unreachable registry are refused with one line; a
// registry whose blob redirect names serve's own API port is refused (src/packs/registry-transport.ts)
// even with loopback opened by CORRAL_REGISTRY_ALLOW_PRIVATE.
import { createServer, request, type Server } from 'node:http'
import { resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PackRecord } from '../../src/client/packs.js'
import { freePort, registryAvailable, startRegistry, type TestRegistry } from '../helpers/registry.js'
import { startStack, type Stack } from '../helpers/serve.js'

const HELLO = resolve(import.meta.dirname, '../../examples/packs/hello-pack')
const available = registryAvailable()

describe.runIf(available)('corral pack with a registry', { timeout: 120_000 }, () => {
  let registry: TestRegistry
  let stack: Stack
  let deadPort: number
  /** A registry front that passes everything to the registry but redirects blob reads to serve's API. */
  let front: Server
  let frontHost: string

  beforeAll(async () => {
    registry = await startRegistry()
    deadPort = await freePort()
    front = createServer((req, res) => {
      if (req.method === 'GET' && /\/blobs\/sha256:/.test(req.url ?? '')) return void res.writeHead(307, { location: `${stack.serve.url}/v1/whoami` }).end()
      req.pipe(request({ host: '127.0.0.1', port: Number(registry.host.split(':')[1]), path: req.url, method: req.method, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode!, up.headers)
        up.pipe(res)
      }))
    })
    await new Promise<void>((r) => front.listen(0, '127.0.0.1', r))
    frontHost = `127.0.0.1:${(front.address() as { port: number }).port}`
    stack = await startStack({
      env: {
        CORRAL_PACK_REGISTRY: `${registry.host}/corral`, CORRAL_REGISTRY_ALLOW: `127.0.0.1:${deadPort},${frontHost}`, CORRAL_REGISTRY_ALLOW_PRIVATE: '127.0.0.0/8',
      },
    })
  }, 60_000)
  afterAll(async () => {
    front?.close()
    await stack?.close()
    await registry?.stop()
  })

  const corral = (...args: string[]) => stack.corral(args)
  async function json<T>(...args: string[]): Promise<T> {
    const r = await corral(...args, '--json')
    expect(r.code, `${args.join(' ')}\n${r.stderr}\n${r.stdout}`).toBe(0)
    return JSON.parse(r.stdout) as T
  }
  async function refused(code: string, ...args: string[]): Promise<string> {
    const r = await corral(...args)
    expect(r.code, `${args.join(' ')}\n${r.stderr}`).toBe(1)
    const lines = r.stderr.trimEnd().split('\n')
    expect(lines, r.stderr).toHaveLength(1)
    expect(lines[0]).toMatch(new RegExp(`^Error: .*\\[${code}\\]`))
    return lines[0]!
  }

  it('uploads (pushing the image), recreates the pack from its image_ref, updates it by image_ref', async () => {
    const uploaded = await json<PackRecord>('pack', 'upload', HELLO)
    expect(uploaded.image_ref).toMatch(new RegExp(`^${registry.host.replaceAll('.', '\\.')}/corral/org_[0-9a-z_]+/hello-pack@sha256:[0-9a-f]{64}$`))
    expect((await corral('pack', 'delete', 'hello-pack')).code).toBe(0)

    const created = await json<PackRecord>('pack', 'create', '--image-ref', uploaded.image_ref!, '--visibility', 'community')
    expect(created).toMatchObject({ name: 'hello-pack', image_origin: 'image_ref', image_ref: uploaded.image_ref, image_digest: uploaded.image_digest, visibility: 'community' })
    const human = await corral('pack', 'show', 'hello-pack')
    expect(human.stdout).toContain(uploaded.image_ref!)

    const byTag = uploaded.image_ref!.replace(/@sha256:.*$/, ':1.0.0')
    const updated = await json<PackRecord>('pack', 'update', 'hello-pack', '--image-ref', byTag)
    expect(updated).toMatchObject({ image_ref: byTag, image_digest: uploaded.image_digest })

    expect(await refused('validation_error', 'pack', 'update', 'hello-pack', '--image-ref', byTag.replace(':1.0.0', ':nope'))).toMatch(/no manifest nope/)
    // (reupload prints its packing progress line first, then the refusal.)
    const reupload = await corral('pack', 'reupload', 'hello-pack', HELLO)
    expect(reupload.code).toBe(1)
    expect(reupload.stderr.trimEnd().split('\n').at(-1)).toMatch(/^Error: .*\[pack_not_reuploadable\]/)
  })

  it('refuses a missing image and an unreachable registry with one line each', async () => {
    expect(await refused('validation_error', 'pack', 'create', '--image-ref', `${registry.host}/elsewhere/none:1`)).toMatch(/no manifest 1/)
    // Under the push namespace, another org's images are refused whether or not they exist.
    expect(await refused('validation_error', 'pack', 'create', '--image-ref', `${registry.host}/corral/org_other/none:1`)).toMatch(/belongs to another organisation/)
    expect(await refused('registry_unavailable', 'pack', 'create', '--image-ref', `127.0.0.1:${deadPort}/x/y:1`)).toMatch(/unreachable/)
    expect(await refused('validation_error', 'pack', 'create', '--image-ref', 'registry.example.com/x:1')).toMatch(/not an allowed pack registry/)
  })

  it("a blob redirect to serve's own API port is refused with one line, though loopback is opened", async () => {
    const shown = await json<PackRecord>('pack', 'show', 'hello-pack')
    // The same repository through the front (another allowed registry, so no push-namespace rule).
    const viaFront = `${frontHost}/${shown.image_ref!.slice(shown.image_ref!.indexOf('/') + 1).replace(/[:@].*$/, '')}:1.0.0`
    expect(await refused('validation_error', 'pack', 'create', '--image-ref', viaFront)).toMatch(/is a listener of corral serve/)
  })
})
