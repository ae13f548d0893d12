// A pack upload refused before its body is read (an unknown pack, one not created by upload, no
// permission) over a real socket: the client still sending gets the error envelope, never a broken
// pipe — also with a chunked body of unknown length, the way `corral pack reupload` streams it to
// count progress (src/client/packs.ts). Past the upload limit the connection is closed instead.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { PackContent } from '../../src/packs/content.js'
import { createHarness, type Harness } from './harness.js'

const BOUNDARY = 'corralpackboundary'

/** A multipart body streamed slowly in chunks, with no content-length (chunked transfer encoding). */
function slowBody(chunks: number, size: number): ReadableStream<Uint8Array> {
  let i = 0
  const head = new TextEncoder().encode(`--${BOUNDARY}\r\ncontent-disposition: form-data; name="archive"; filename="p.tar.gz"\r\ncontent-type: application/gzip\r\n\r\n`)
  return new ReadableStream({
    async pull(controller) {
      if (i === 0) controller.enqueue(head)
      if (i++ >= chunks) {
        controller.enqueue(new TextEncoder().encode(`\r\n--${BOUNDARY}--\r\n`))
        controller.close()
        return
      }
      await new Promise((r) => setTimeout(r, 10))
      controller.enqueue(new Uint8Array(size).fill(120))
    },
  })
}

describe('pack upload refused before its body is read', () => {
  let h: Harness
  let base: string
  let org: Awaited<ReturnType<Harness['newOrg']>>
  const root = mkdtempSync(join(tmpdir(), 'corral-pack-refused-'))
  beforeAll(async () => {
    h = await createHarness()
    h.deps.packContent = new PackContent(root, { maxCompressedBytes: 1024 * 1024, maxUncompressedBytes: 4 * 1024 * 1024, maxEntries: 100 })
    await h.app.listen({ host: '127.0.0.1', port: 0 })
    base = `http://127.0.0.1:${(h.app.server.address() as { port: number }).port}`
    org = await h.newOrg()
  })
  afterAll(async () => {
    await h.close()
    rmSync(root, { recursive: true, force: true })
  })

  it('a chunked re-upload of an unknown pack is answered 404 with the envelope after the body, not cut', async () => {
    // 20 × 16 KiB, 10 ms apart: the refusal comes while most of the body is still to be sent.
    const res = await fetch(`${base}/v1/packs/pack_nope/upload`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${org.ownerKey}`, 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
      body: slowBody(20, 16 * 1024),
      duplex: 'half',
    } as RequestInit)
    expect(res.status, await res.clone().text()).toBe(404)
    expect(res.headers.get('connection')).not.toBe('close')
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('not_found')
  })
})
