// DNS over a byte stream (RFC 1035 4.2.2: each message behind its two-byte length), the way the
// sandbox hands its queries to the proxy: the in-sandbox listener turns each UDP datagram into one
// framed message on a stream, and a TCP client's stream is relayed as it is.
import type { Duplex } from 'node:stream'
import type { LookupHooks, WorkspaceResolver } from './resolver.js'

/** Largest message accepted on a stream (a query is a few hundred bytes at most). */
const MAX_MESSAGE = 4096

/** Answers each framed query on `stream` in order until it ends; a malformed frame closes it. */
export function serveDnsStream(stream: Duplex, resolver: WorkspaceResolver, hooks: LookupHooks): void {
  let buffered = Buffer.alloc(0)
  let chain = Promise.resolve()
  stream.on('error', () => stream.destroy())
  stream.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk])
    while (buffered.length >= 2) {
      const size = buffered.readUInt16BE(0)
      if (size === 0 || size > MAX_MESSAGE) {
        stream.destroy()
        return
      }
      if (buffered.length < 2 + size) break
      const message = buffered.subarray(2, 2 + size)
      buffered = buffered.subarray(2 + size)
      chain = chain.then(async () => {
        const { reply } = await resolver.answer(message, hooks)
        if (!reply || stream.destroyed) return
        const head = Buffer.alloc(2)
        head.writeUInt16BE(reply.length)
        stream.write(Buffer.concat([head, reply]))
      }).catch(() => { stream.destroy() })
    }
    if (buffered.length > 2 + MAX_MESSAGE) stream.destroy()
  })
  stream.on('end', () => { void chain.then(() => stream.end()) })
}
