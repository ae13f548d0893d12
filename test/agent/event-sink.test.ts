// The agent's event sink against a real HTTP server: a 503 (the audit log briefly away) is retried
// after its Retry-After until accepted, a bounded number of times; other refusals are not retried.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Agent } from 'undici'
import { afterEach, describe, expect, it } from 'vitest'
import { HttpEventSink } from '../../src/agent/event-sink.js'

let server: Server | undefined
const dispatcher = new Agent()
afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())))

/** A server answering `statuses` in turn (the last one repeats); returns its base URL and the bodies it saw. */
async function serveStatuses(statuses: number[]): Promise<{ base: string; seen: string[] }> {
  const seen: string[] = []
  server = createServer((req, res) => {
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      seen.push(body)
      const status = statuses[Math.min(seen.length - 1, statuses.length - 1)]!
      res.writeHead(status, status === 503 ? { 'retry-after': '0' } : {}).end('{}')
    })
  })
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()))
  return { base: `http://127.0.0.1:${(server!.address() as AddressInfo).port}`, seen }
}

describe('HttpEventSink', () => {
  it('retries an event refused 503 until it is accepted', async () => {
    const { base, seen } = await serveStatuses([503, 503, 202])
    const lines: string[] = []
    await new HttpEventSink(base, dispatcher, (l) => lines.push(l)).emit('task_1', { type: 'current_status', status: 'x' })
    expect(seen).toHaveLength(3)
    expect(new Set(seen).size).toBe(1)
    expect(lines).toEqual([])
  })

  it('gives up after its attempts and says so once', async () => {
    const { base, seen } = await serveStatuses([503])
    const lines: string[] = []
    await new HttpEventSink(base, dispatcher, (l) => lines.push(l), { attempts: 3 }).emit('task_1', { type: 'current_status', status: 'x' })
    expect(seen).toHaveLength(3)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/refused \(503\)/)
  })

  it('does not retry other refusals', async () => {
    const { base, seen } = await serveStatuses([429])
    const lines: string[] = []
    await new HttpEventSink(base, dispatcher, (l) => lines.push(l)).emit('task_1', { type: 'current_status', status: 'x' })
    expect(seen).toHaveLength(1)
    expect(lines[0]).toMatch(/refused \(429\)/)
  })
})
