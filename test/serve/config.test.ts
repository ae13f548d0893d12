// serve's flags and environment are read once, before anything opens: a bad value is a clear
// error naming it; the proxy port follows flag → env → 7071 (a free one when the API's is 0).
import { describe, expect, it } from 'vitest'
import { serveConfig } from '../../src/serve/index.js'

const base = { dataDir: '/srv/corral', host: '127.0.0.1', port: 7070 }

describe('serveConfig', () => {
  it('fills the defaults: the SQLite store in the data dir, proxy 7071, the local runtime', () => {
    const c = serveConfig({ ...base, env: {} })
    expect(c).toMatchObject({ dataDir: '/srv/corral', dbUrl: 'sqlite:/srv/corral/corral.db', proxyPort: 7071, runtime: 'local', allowUnenforcedLimits: false })
    expect(c.taskRateLimit).toEqual({ capacity: 30, refillPerSecond: 0.5 })
    expect(Object.isFrozen(c)).toBe(true)
  })

  it('reads the agents\' uid range: CORRAL_SANDBOX_UID its first uid, CORRAL_SANDBOX_UID_COUNT its size, within 32 bits', () => {
    expect(serveConfig({ ...base, env: {} })).toMatchObject({ sandboxUid: 2_000_000_000, sandboxUidCount: 100_000_000 })
    expect(serveConfig({ ...base, env: { CORRAL_SANDBOX_UID: '70000', CORRAL_SANDBOX_UID_COUNT: '5000' } })).toMatchObject({ sandboxUid: 70000, sandboxUidCount: 5000 })
    expect(serveConfig({ ...base, env: { CORRAL_SANDBOX_UID: '4294967000' } }).sandboxUidCount).toBe(295)
    expect(() => serveConfig({ ...base, env: { CORRAL_SANDBOX_UID_COUNT: '1' } })).toThrow(/CORRAL_SANDBOX_UID_COUNT must be a whole number ≥ 2/)
    expect(() => serveConfig({ ...base, env: { CORRAL_SANDBOX_UID: '4294967000', CORRAL_SANDBOX_UID_COUNT: '1000' } })).toThrow(/CORRAL_SANDBOX_UID_COUNT/)
  })

  it('takes the proxy port from the flag, then CORRAL_PROXY_PORT, and a free one when the API port is 0', () => {
    expect(serveConfig({ ...base, proxyPort: 9001, env: { CORRAL_PROXY_PORT: '9002' } }).proxyPort).toBe(9001)
    expect(serveConfig({ ...base, env: { CORRAL_PROXY_PORT: '9002' } }).proxyPort).toBe(9002)
    expect(serveConfig({ ...base, port: 0, env: {} }).proxyPort).toBe(0)
  })

  it('refuses an unknown runtime, a malformed agent command and a negative task rate, naming them', () => {
    expect(() => serveConfig({ ...base, runtime: 'docker', env: {} })).toThrow(/--runtime must be one of local, process/)
    expect(() => serveConfig({ ...base, env: { CORRAL_AGENT_COMMAND: 'node agent.js' } })).toThrow(/CORRAL_AGENT_COMMAND must be a JSON array of strings/)
    expect(() => serveConfig({ ...base, env: { CORRAL_AGENT_COMMAND: '[]' } })).toThrow(/CORRAL_AGENT_COMMAND/)
    expect(() => serveConfig({ ...base, env: { CORRAL_TASK_RATE_BURST: '-1' } })).toThrow(/CORRAL_TASK_RATE_BURST/)
    expect(() => serveConfig({ ...base, env: { CORRAL_SANDBOX_UID: '0' } })).toThrow(/CORRAL_SANDBOX_UID/)
  })

  it('reads the upstream CA list, the agent command and the opt-out of unenforced limits', () => {
    const c = serveConfig({ ...base, env: { CORRAL_UPSTREAM_CA: ' /a.pem, ,/b.pem', CORRAL_AGENT_COMMAND: '["node","a.js"]', CORRAL_ALLOW_UNENFORCED_LIMITS: '1' } })
    expect(c.upstreamCaFiles).toEqual(['/a.pem', '/b.pem'])
    expect(c.agentCommand).toEqual(['node', 'a.js'])
    expect(c.allowUnenforcedLimits).toBe(true)
  })

  it('the public URL (OAuth callback base): flag over CORRAL_PUBLIC_URL, unset by default, a bad one refused by name', () => {
    expect(serveConfig({ ...base, env: {} }).publicUrl).toBeUndefined()
    expect(serveConfig({ ...base, env: { CORRAL_PUBLIC_URL: 'https://corral.example.com/' } }).publicUrl).toBe('https://corral.example.com')
    expect(serveConfig({ ...base, publicUrl: 'https://a.example/corral', env: { CORRAL_PUBLIC_URL: 'https://b.example' } }).publicUrl).toBe('https://a.example/corral')
    for (const bad of ['corral.example.com', 'ftp://x.example', 'https://x.example/?a=1', 'https://u:p@x.example']) {
      expect(() => serveConfig({ ...base, env: { CORRAL_PUBLIC_URL: bad } })).toThrow(/CORRAL_PUBLIC_URL/)
    }
  })
})
