// The server log for people and for machines: pretty lines hold one line per request (method, URL
// without secrets, status, time); JSON lines keep fastify's two.
import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { createLogger, type LogFormat } from '../../src/server/logger.js'

function logRequest(format: LogFormat): string[] {
  const out = new PassThrough()
  let text = ''
  out.on('data', (c) => (text += String(c)))
  const logger = createLogger({ level: 'info', destination: out, format })
  const request = logger.child({ request_id: 'req_1' })
  request.info({ req: { method: 'GET', url: '/v1/audit/stream?api_key=crl_secret', ip: '127.0.0.1' } }, 'incoming request')
  request.info({ res: { statusCode: 200 }, responseTime: 3.4 }, 'request completed')
  logger.info('shutting down')
  return text.trim().split('\n')
}

describe('createLogger', () => {
  it('pretty: one line per request with method, redacted URL, status and time', () => {
    const lines = logRequest('pretty')
    expect(lines).toHaveLength(2)
    expect(lines[0]).toContain('GET /v1/audit/stream?api_key=[Redacted] 200 3 ms')
    expect(lines[0]).toContain('req_1')
    expect(lines.join('\n')).not.toContain('crl_secret')
    expect(lines.join('\n')).not.toContain('incoming request')
    expect(lines[1]).toContain('shutting down')
    expect(lines[0]!.startsWith('{')).toBe(false)
  })

  it('json: both of fastify\'s lines, one JSON object each', () => {
    const lines = logRequest('json').map((l) => JSON.parse(l))
    expect(lines.map((l) => l.msg)).toEqual(['incoming request', 'request completed', 'shutting down'])
    expect(lines[0].req.url).toBe('/v1/audit/stream?api_key=[Redacted]')
    expect(lines[1]).toMatchObject({ request_id: 'req_1', res: { status: 200 } })
  })
})
