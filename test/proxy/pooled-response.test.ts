// The pooled client's answer as undici's dispatch handler (src/proxy/pooled-response.ts), driven
// through the callbacks undici's HTTP/1.1 client makes: what arrives before the relay attaches is
// handed over in order, backpressure pauses and resumes the parser, a resume after the exchange is
// over never touches the parser (its connection may already carry another request), a cut aborts
// the exchange once, and the stream view carries the same bytes. The relay over real sockets:
// test/proxy/relay.test.ts.
import { EventEmitter } from 'node:events'
import { describe, expect, it } from 'vitest'
import { PooledResponse, type BodySink } from '../../src/proxy/pooled-response.js'

class ClientGone extends EventEmitter {
  aborted = false
  abort(): void {
    this.aborted = true
    this.emit('abort')
  }
}

/** A handler past its head, with counters for undici's abort and resume. */
function answered(signal?: ClientGone): { r: PooledResponse; aborts: Error[]; resumes: () => number; settled: Array<Error | PooledResponse | undefined> } {
  const settled: Array<Error | PooledResponse | undefined> = []
  const r = new PooledResponse((err, res) => settled.push(err ?? res), signal, undefined)
  const aborts: Error[] = []
  let resumes = 0
  r.onConnect((err) => {
    aborts.push(err)
    r.onError(err)
  })
  r.onHeaders(200, [Buffer.from('content-type'), Buffer.from('text/plain'), Buffer.from('X-Two'), Buffer.from('a'), Buffer.from('x-two'), Buffer.from('b')], () => resumes++)
  return { r, aborts, resumes: () => resumes, settled }
}

function recording(accept = true): BodySink & { got: string[]; ended: number; errors: Error[]; accept: boolean } {
  const s = {
    got: [] as string[],
    ended: 0,
    errors: [] as Error[],
    accept,
    data(chunk: Buffer): boolean {
      s.got.push(chunk.toString())
      return s.accept
    },
    end(): void {
      s.ended++
    },
    error(err: Error): void {
      s.errors.push(err)
    },
  }
  return s
}

describe('the pooled answer as a dispatch handler', () => {
  it('resolves with the status and headers (lowercased, repeats as a list) once the head arrives; 1xx is skipped', () => {
    const settled: unknown[] = []
    const r = new PooledResponse((err, res) => settled.push(err ?? res), undefined, undefined)
    r.onConnect(() => {})
    expect(r.onHeaders(100, [], () => {})).toBe(true)
    expect(settled).toEqual([])
    const { r: a, settled: s2 } = answered()
    expect(s2).toEqual([a])
    expect(a.status).toBe(200)
    expect(a.headers).toEqual({ 'content-type': 'text/plain', 'x-two': ['a', 'b'] })
  })

  it('what arrived before the attach is handed over in order with its end; then nothing is resumed', () => {
    const { r, resumes } = answered()
    expect(r.onData(Buffer.from('one'))).toBe(true)
    expect(r.onData(Buffer.from('two'))).toBe(true)
    r.onComplete()
    const sink = recording()
    r.attach(sink)
    expect(sink.got).toEqual(['one', 'two'])
    expect(sink.ended).toBe(1)
    r.resume()
    expect(resumes()).toBe(0)
  })

  it('64 KiB queued before the attach pause the parser; an attach that takes them resumes it', () => {
    const { r, resumes } = answered()
    expect(r.onData(Buffer.alloc(40_000))).toBe(true)
    expect(r.onData(Buffer.alloc(40_000))).toBe(false)
    r.attach(recording())
    expect(resumes()).toBe(1)
    expect(r.onData(Buffer.from('more'))).toBe(true)
  })

  it('a sink that refuses a chunk pauses the parser until resume, once', () => {
    const { r, resumes } = answered()
    const sink = recording(false)
    r.attach(sink)
    expect(r.onData(Buffer.from('a'))).toBe(false)
    r.resume()
    r.resume()
    expect(resumes()).toBe(1)
    sink.accept = true
    expect(r.onData(Buffer.from('b'))).toBe(true)
    expect(sink.got).toEqual(['a', 'b'])
  })

  it('a sink that asks for a resume from within its own data call gets the chunk accepted instead', () => {
    const { r, resumes } = answered()
    r.attach({ data: () => (r.resume(), false), end: () => {}, error: () => {} })
    expect(r.onData(Buffer.from('a'))).toBe(true)
    expect(resumes()).toBe(0)
  })

  it('a resume after the exchange is over never touches the parser (the connection may carry another request)', () => {
    // The sink refused the last queued chunk, so the handler counts itself paused, but the parser
    // was not paused and went on to complete the message.
    const { r, resumes } = answered()
    r.onData(Buffer.from('a'))
    const sink = recording(false)
    r.attach(sink)
    r.onComplete()
    expect(sink.ended).toBe(1)
    r.resume()
    expect(resumes()).toBe(0)
  })

  it('destroy aborts the exchange once, and undici\'s error that follows reaches no sink', () => {
    const { r, aborts } = answered()
    const sink = recording()
    r.attach(sink)
    r.destroy()
    r.destroy()
    expect(aborts).toHaveLength(1)
    expect((aborts[0] as Error & { code?: string }).code).toBe('UND_ERR_ABORTED')
    expect(sink.errors).toEqual([])
  })

  it('an upstream error mid-body reaches the sink (before or after the attach), and a destroy after it does nothing', () => {
    const early = answered()
    early.r.onError(Object.assign(new Error('reset'), { code: 'UND_ERR_SOCKET' }))
    const a = recording()
    early.r.attach(a)
    expect(a.errors.map((e) => e.message)).toEqual(['reset'])
    expect(a.ended).toBe(0)
    const late = answered()
    const b = recording()
    late.r.attach(b)
    late.r.onError(new Error('reset'))
    late.r.destroy()
    expect(b.errors).toHaveLength(1)
    expect(late.aborts).toHaveLength(0)
  })

  it('an error before the head rejects, and destroys a stream request body', async () => {
    const { Readable } = await import('node:stream')
    const body = new Readable({ read() {} })
    const settled: unknown[] = []
    const r = new PooledResponse((err, res) => settled.push(err ?? res), undefined, body)
    r.onError(new Error('refused'))
    expect((settled[0] as Error).message).toBe('refused')
    expect(body.destroyed).toBe(true)
  })

  it('the client leaving before the connection aborts at connect; after the head it cuts the exchange', () => {
    const gone = new ClientGone()
    gone.abort()
    const settled: unknown[] = []
    const r = new PooledResponse((err, res) => settled.push(err ?? res), gone, undefined)
    const aborts: Error[] = []
    r.onConnect((err) => {
      aborts.push(err)
      r.onError(err)
    })
    expect(aborts).toHaveLength(1)
    expect((settled[0] as Error & { code?: string }).code).toBe('UND_ERR_ABORTED')
    const later = new ClientGone()
    const h = answered(later)
    later.abort()
    expect(h.aborts).toHaveLength(1)
  })

  it('the stream view carries the same bytes and end; once read, the direct body is gone', async () => {
    const { r } = answered()
    r.onData(Buffer.from('one '))
    expect(r.direct).toBe(r)
    const stream = r.body
    expect(r.direct).toBeUndefined()
    r.onData(Buffer.from('two'))
    r.onComplete()
    let text = ''
    for await (const c of stream) text += String(c)
    expect(text).toBe('one two')
  })
})
