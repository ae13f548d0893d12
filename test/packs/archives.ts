// Builds tar.gz archives in memory for the pack tests, hostile ones included (absolute names,
// `..`, links pointing out, devices): tar-stream writes whatever header it is given.
import { gzipSync } from 'node:zlib'
import tarStream from 'tar-stream'

export interface TestEntry {
  name: string
  type?: 'file' | 'directory' | 'symlink' | 'link' | 'fifo' | 'character-device' | 'block-device'
  body?: string | Buffer
  linkname?: string
  mode?: number
  /** Declared size, when it should differ from the body (lying headers). */
  size?: number
}

export async function tarOf(entries: readonly TestEntry[]): Promise<Buffer> {
  const pack = tarStream.pack()
  const chunks: Buffer[] = []
  const done = (async () => {
    for await (const c of pack) chunks.push(c as Buffer)
  })()
  for (const e of entries) {
    const type = e.type ?? 'file'
    await new Promise<void>((resolve, reject) => {
      const cb = (err?: Error | null) => (err ? reject(err) : resolve())
      const header = { name: e.name, type, mode: e.mode ?? (type === 'directory' ? 0o755 : 0o644), mtime: new Date(1_700_000_000_000), ...(e.linkname !== undefined ? { linkname: e.linkname } : {}) }
      if (type === 'file') pack.entry(header, e.body ?? '', cb)
      else pack.entry(header, cb)
    })
  }
  pack.finalize()
  await done
  return Buffer.concat(chunks)
}

export async function tgzOf(entries: readonly TestEntry[]): Promise<Buffer> {
  return gzipSync(await tarOf(entries))
}

export const MANIFEST = 'name: demo\nversion: "1.0.0"\n'
export const CAPS = '- name: api\n  type: http\n  allow:\n    - domains: [api.example.com]\n      methods: [GET]\n'

/** A valid pack: pack.yaml, a capabilities fragment, an executable agent, a nested file. */
export function demoPack(opts: { name?: string; version?: string; prefix?: string; extra?: TestEntry[]; manifest?: string } = {}): Promise<Buffer> {
  const p = opts.prefix ? `${opts.prefix}/` : ''
  const manifest = opts.manifest ?? `name: ${opts.name ?? 'demo'}\nversion: "${opts.version ?? '1.0.0'}"\ndescription: A demo pack\ncategory: testing\ncapabilities: caps.yaml\nagent:\n  command: [./bin/agent, --fast]\n`
  return tgzOf([
    { name: `${p}pack.yaml`, body: manifest },
    { name: `${p}caps.yaml`, body: CAPS },
    { name: `${p}bin/`, type: 'directory' },
    { name: `${p}bin/agent`, body: '#!/bin/sh\necho hi\n', mode: 0o755 },
    { name: `${p}docs/readme.md`, body: '# demo\n' },
    ...(opts.extra ?? []),
  ])
}
