// Flattening an image's layers (tar or tar+gzip, hostile input) into one plain tar that the pack
// archive reader (archive.ts) then extracts with its usual rules — absolute paths, `..`, links out
// of the pack, devices, sizes and entry counts are all judged there, once. This module only
// applies the layer semantics of the OCI image spec ("Applying Changesets"):
//   - a later layer's entry replaces an earlier one at the same path; a non-directory replaces a
//     whole earlier subtree, a directory merges with an earlier directory;
//   - `.wh.<name>` deletes <name> (and what is below it) from earlier layers;
//   - `.wh..wh..opq` in a directory deletes everything earlier layers put below it.
// Two passes over the layers (kept on disk by the caller): the first builds a trie of which
// (layer, entry) survives at each path, the second emits exactly those entries in layer order.
import { createReadStream } from 'node:fs'
import { open } from 'node:fs/promises'
import { Readable, Transform, type TransformCallback } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { createGunzip } from 'node:zlib'
import tarStream from 'tar-stream'
import { apiError } from '../contract/index.js'

type TarEntry = ReturnType<typeof tarStream.extract> extends AsyncIterable<infer S> ? S : never

export interface LayerLimits {
  /** Most entries across all layers (whiteouts and replaced entries included). */
  readonly maxEntries: number
  /** Most tar bytes across all layers once decompressed. */
  readonly maxTarBytes: number
}

const WHITEOUT = '.wh.'
const OPAQUE = '.wh..wh..opq'

interface Node {
  children: Map<string, Node>
  /** The surviving entry at this path: layer index and ordinal within that layer. */
  entry?: { layer: number; ordinal: number; dir: boolean }
}

/**
 * Resolves with a plain tar stream of the flattened image: the surviving entries, each once,
 * names normalised (no leading `./` or `/`), whiteout markers dropped. `layers` are files holding
 * the layer blobs (gzip-compressed or not). Refusals are `validation_error` on `image_ref`.
 */
export async function flattenLayers(layers: readonly string[], limits: LayerLimits): Promise<Readable> {
  const root: Node = { children: new Map() }
  const budget = { entries: 0, bytes: 0 }
  for (let i = 0; i < layers.length; i++) {
    let ordinal = 0
    await readLayer(layers[i]!, limits, budget, async (entry) => {
      apply(root, i, ordinal++, entry.header.name, entry.header.type === 'directory')
    })
  }
  const out = tarStream.pack()
  void (async () => {
    for (let i = 0; i < layers.length; i++) {
      let ordinal = 0
      await readLayer(layers[i]!, limits, { entries: 0, bytes: 0 }, async (entry) => {
        const k = ordinal++
        const parts = pathParts(entry.header.name)
        const node = find(root, parts)
        if (!node?.entry || node.entry.layer !== i || node.entry.ordinal !== k || isWhiteout(parts)) return
        await copyEntry(out, entry, parts.join('/'))
      })
    }
    out.finalize()
  })().catch((err: Error) => out.destroy(err))
  // A consumer that refuses the pack destroys this stream; its readers learn of errors by pipeline or iteration.
  return quiet(Readable.from(out as AsyncIterable<Buffer>))
}

/** Records one entry of layer `layer` in the trie, applying whiteouts and replacements. */
function apply(root: Node, layer: number, ordinal: number, name: string, dir: boolean): void {
  const parts = pathParts(name)
  if (parts.length === 0) return
  const base = parts[parts.length - 1]!
  if (base === OPAQUE) {
    const node = find(root, parts.slice(0, -1))
    if (node) for (const child of node.children.values()) prune(child, layer)
    return
  }
  if (base.startsWith(WHITEOUT)) {
    const node = find(root, [...parts.slice(0, -1), base.slice(WHITEOUT.length)])
    if (node) prune(node, layer)
    return
  }
  const node = ensure(root, parts)
  if (!dir) {
    // A file or link replaces whatever earlier layers had here, the subtree below included.
    for (const child of node.children.values()) prune(child, layer)
  }
  node.entry = { layer, ordinal, dir }
}

/** Drops entries of layers before `layer` in this subtree (the current layer's own entries stay). */
function prune(node: Node, layer: number): void {
  if (node.entry && node.entry.layer < layer) delete node.entry
  for (const [name, child] of node.children) {
    prune(child, layer)
    if (!child.entry && child.children.size === 0) node.children.delete(name)
  }
}

function find(root: Node, parts: readonly string[]): Node | undefined {
  let node: Node | undefined = root
  for (const p of parts) {
    node = node.children.get(p)
    if (!node) return undefined
  }
  return node
}

function ensure(root: Node, parts: readonly string[]): Node {
  let node = root
  for (const p of parts) {
    let next = node.children.get(p)
    if (!next) {
      next = { children: new Map() }
      node.children.set(p, next)
    }
    node = next
  }
  return node
}

/** `./a//b/` → [a, b]. `..` and absolute names are kept for archive.ts to refuse. */
function pathParts(name: string): string[] {
  const parts = name.split('/').filter((p) => p !== '' && p !== '.')
  if (name.startsWith('/') && parts.length > 0) parts[0] = `/${parts[0]}`
  return parts
}

function isWhiteout(parts: readonly string[]): boolean {
  return parts.length > 0 && parts[parts.length - 1]!.startsWith(WHITEOUT)
}

/** Reads a layer file's tar entries in order, gunzipping when it starts with gzip's magic. */
async function readLayer(file: string, limits: LayerLimits, budget: { entries: number; bytes: number }, each: (entry: TarEntry) => Promise<void>): Promise<void> {
  const head = Buffer.alloc(4)
  const fh = await open(file, 'r')
  let gzip: boolean
  try {
    const { bytesRead } = await fh.read(head, 0, 4, 0)
    gzip = bytesRead >= 2 && head[0] === 0x1f && head[1] === 0x8b
    if (bytesRead === 4 && head.readUInt32LE(0) === 0xfd2fb528) throw refuse('has a zstd-compressed layer; only tar and tar+gzip layers are supported')
  } finally {
    await fh.close()
  }
  const extract = tarStream.extract()
  // The pipeline and the loop below report failures; a late 'premature close' after either settled must not be uncaught.
  extract.on('error', () => {})
  const counted = quiet(new TarBudget(limits, budget))
  const consume = (async () => {
    for await (const entry of extract) {
      if (++budget.entries > limits.maxEntries) {
        entry.resume()
        throw refuse(`has more than ${limits.maxEntries} entries across its layers`)
      }
      await each(entry)
      // Whatever the callback did not read is skipped.
      for await (const chunk of entry) void chunk
    }
  })()
  try {
    await Promise.all([
      pipeline(gzip ? [quiet(createReadStream(file)), quiet(createGunzip()), counted, extract] : [quiet(createReadStream(file)), counted, extract]),
      consume,
    ])
  } catch (err) {
    extract.destroy()
    await consume.catch(() => {})
    const e = err as { code?: string; message?: string; status?: number }
    if (typeof e.status === 'number') throw err
    throw refuse(`has a layer that is not a valid tar${gzip ? '+gzip' : ''}: ${(e.message ?? String(err)).split('\n')[0]}`)
  }
}

async function copyEntry(out: ReturnType<typeof tarStream.pack>, entry: TarEntry, name: string): Promise<void> {
  const h = entry.header
  const header = {
    name: h.type === 'directory' ? `${name}/` : name,
    type: h.type,
    mode: h.mode ?? 0o644,
    size: h.type === 'file' || h.type === 'contiguous-file' ? (h.size ?? 0) : 0,
    mtime: new Date(0),
    ...(h.linkname ? { linkname: h.linkname } : {}),
  }
  await new Promise<void>((resolve, reject) => {
    const sink = out.entry(header, (err) => (err ? reject(err) : resolve()))
    // Destroyed with the output when the reader refuses the pack: report, never throw.
    sink.on('error', reject)
    void (async () => {
      for await (const chunk of entry) {
        // Back-pressure; a destroyed output (the reader refused the pack) ends the wait too.
        if (!sink.write(chunk as Buffer)) await drained(sink)
        if (sink.destroyed) throw new Error('the flattened tar was abandoned')
      }
      sink.end(undefined)
    })().catch(reject)
  })
}

/** Resolves on the sink's next 'drain', or its 'close' when the output was abandoned. */
function drained(sink: NodeJS.EventEmitter): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      sink.off('drain', done)
      sink.off('close', done)
      resolve()
    }
    sink.on('drain', done)
    sink.on('close', done)
  })
}

/**
 * When the reader stops early (the consumer refused the pack), pipeline destroys the middle
 * streams with a 'premature close' that nobody listens for any more; the pipeline's own promise
 * has reported the failure already.
 */
function quiet<T extends NodeJS.EventEmitter>(stream: T): T {
  stream.on('error', () => {})
  return stream
}

function refuse(why: string) {
  return apiError('validation_error', `the image ${why}`, { fields: { image_ref: why } })
}

/** Counts decompressed tar bytes across layers against maxTarBytes. */
class TarBudget extends Transform {
  constructor(readonly limits: LayerLimits, readonly budget: { bytes: number }) {
    super()
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.budget.bytes += chunk.length
    if (this.budget.bytes > this.limits.maxTarBytes) return done(refuse(`has more than ${this.limits.maxTarBytes} bytes of layer tar`))
    done(null, chunk)
  }
}
