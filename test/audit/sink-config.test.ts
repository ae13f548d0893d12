// The audit sinks' environment: what an operator sets, and one clear error for what cannot be used.
import { describe, expect, it } from 'vitest'
import { auditSinksFromEnv } from '../../src/audit/index.js'
import { serveConfig } from '../../src/serve/config.js'

describe('audit sink configuration', () => {
  it('no endpoint, no sink; an endpoint without a path gets /v1/logs; headers are percent-decoded', () => {
    expect(auditSinksFromEnv({})).toEqual([])
    const [otlp, ocsf] = auditSinksFromEnv({
      CORRAL_AUDIT_OTLP_ENDPOINT: 'http://collector:4318', CORRAL_AUDIT_OTLP_HEADERS: 'authorization=Bearer%20abc, x-scope = team%3Dsec',
      CORRAL_AUDIT_OTLP_PROTOCOL: 'http/json', CORRAL_AUDIT_OCSF_ENDPOINT: 'https://siem.example/ingest?src=corral', CORRAL_AUDIT_SINK_BATCH: '50',
    })
    expect(otlp).toMatchObject({ name: 'otlp', kind: 'otlp', url: 'http://collector:4318/v1/logs', encoding: 'json', batchSize: 50, headers: { authorization: 'Bearer abc', 'x-scope': 'team=sec' } })
    expect(ocsf).toMatchObject({ name: 'ocsf', kind: 'ocsf', url: 'https://siem.example/ingest?src=corral', batchSize: 50 })
    expect(auditSinksFromEnv({ CORRAL_AUDIT_OTLP_ENDPOINT: 'http://c:4318/custom/logs' })[0]!.url).toBe('http://c:4318/custom/logs')
  })

  it.each([
    [{ CORRAL_AUDIT_OTLP_ENDPOINT: 'not a url' }, /CORRAL_AUDIT_OTLP_ENDPOINT/],
    [{ CORRAL_AUDIT_OTLP_ENDPOINT: 'ftp://c/x' }, /only http and https/],
    [{ CORRAL_AUDIT_OTLP_ENDPOINT: 'http://c', CORRAL_AUDIT_OTLP_PROTOCOL: 'grpc' }, /CORRAL_AUDIT_OTLP_PROTOCOL/],
    [{ CORRAL_AUDIT_OTLP_ENDPOINT: 'http://c', CORRAL_AUDIT_OTLP_HEADERS: 'novalue' }, /CORRAL_AUDIT_OTLP_HEADERS/],
    [{ CORRAL_AUDIT_OTLP_ENDPOINT: 'http://c', CORRAL_AUDIT_OTLP_HEADERS: 'a=%E0%A4%A' }, /percent-encoded/],
    [{ CORRAL_AUDIT_OCSF_ENDPOINT: 'http://c', CORRAL_AUDIT_SINK_BATCH: '0' }, /CORRAL_AUDIT_SINK_BATCH/],
    [{ CORRAL_AUDIT_OTLP_ENDPOINT: 'http://c', CORRAL_AUDIT_OCSF_ENDPOINT: 'http://d', CORRAL_AUDIT_OCSF_CURSOR: 'otlp' }, /same cursor/],
  ])('%o is refused with a line naming the setting', (env, message) => {
    expect(() => auditSinksFromEnv(env)).toThrow(message)
    expect(() => serveConfig({ dataDir: '/tmp/x', host: '127.0.0.1', port: 0, env: env as Record<string, string> })).toThrow(message)
  })
})
