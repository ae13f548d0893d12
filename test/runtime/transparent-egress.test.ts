// Transparent egress from inside a real bubblewrap workspace, HTTPS_PROXY unset: ordinary tools
// resolve through corral's resolver and their connections are decided by the real proxy.
import { mkdtemp, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { networkInterfaces, tmpdir } from 'node:os'
import { createSocket } from 'node:dgram'
import { setTimeout as sleep } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startHarness, type Harness } from '../proxy/harness.js'
import { startNamedUpstreams, type NamedUpstreams } from '../proxy/transparent-harness.js'
import { bwrapAvailable, runtimeBehind } from './helpers.js'
import { startGitServer, type GitServer } from './git-http-server.js'
import { localRuntime, type LocalRuntimeUnderTest } from './drivers.js'

const available = (await bwrapAvailable()) && process.getuid?.() === 0

const caps = (https: number, http: number) => `
- name: allowed-api
  type: http
  allow:
    - domains: ["api.allowed.dev:${https}", "plain.allowed.dev:${http}"]
      methods: [GET]
      allow_insecure: true
      allow_private: ["127.0.0.0/8"]
`

const NODE_CLIENT = String.raw`
const dns = require('node:dns'), net = require('node:net'), tls = require('node:tls')
dns.lookup('api.allowed.dev', { family: 4 }, (err, addr) => {
  if (err) return console.log(JSON.stringify({ err: err.code }))
  const s = net.connect(Number(process.env.HTTPS_PORT), addr, () => {
    const t = tls.connect({ socket: s, servername: 'api.allowed.dev' }, () => t.write('GET /node HTTP/1.1\r\nhost: api.allowed.dev\r\nconnection: close\r\n\r\n'))
    let body = ''
    t.on('data', (d) => (body += d))
    t.on('end', () => console.log(JSON.stringify({ addr, status: body.split('\r\n')[0], hello: body.includes('hello api.allowed.dev') })))
    t.on('error', (e) => console.log(JSON.stringify({ err: e.message })))
  })
  s.on('error', (e) => console.log(JSON.stringify({ err: e.code })))
})
`

const SCRIPT = String.raw`
unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy
cd /data
getent hosts api.allowed.dev > getent.txt 2>&1
dig +short +time=3 +tries=1 api.allowed.dev > dig.txt 2>&1
dig +time=3 +tries=1 api.allowed.dev AAAA > dig-aaaa.txt 2>&1
dig +tcp +short +time=3 +tries=1 api.allowed.dev > dig-tcp.txt 2>&1
dig +time=3 +tries=1 allowed.dev AXFR > dig-axfr.txt 2>&1
curl -sS --max-time 10 https://api.allowed.dev:$HTTPS_PORT/curl > curl.txt 2>&1
curl -sS --max-time 10 -o /dev/null -w '%{http_code}' https://denied.elsewhere.dev:$HTTPS_PORT/curl-denied > curl-denied.txt 2>&1
curl -sS --max-time 10 http://plain.allowed.dev:$HTTP_PORT/curl-plain > curl-plain.txt 2>&1
python3 -c "import urllib.request, os; print(urllib.request.urlopen('https://api.allowed.dev:%s/python' % os.environ['HTTPS_PORT'], timeout=10).read().decode())" > python.txt 2>&1
node -e "$NODE_CLIENT" > node.txt 2>&1
timeout 5 bash -c 'exec 3<>/dev/tcp/api.allowed.dev/22; echo SSH-2.0-OpenSSH_9.6 >&3; cat <&3' > ssh.txt 2>&1; echo "exit $?" >> ssh.txt
true
`

describe.skipIf(!available)('transparent egress from a bubblewrap workspace', () => {
  let h: Harness
  let up: NamedUpstreams
  let sandboxes: Awaited<ReturnType<typeof runtimeBehind>>
  let runtime: LocalRuntimeUnderTest
  let workspaceId: string
  let token: string
  let gitServer: GitServer

  beforeAll(async () => {
    const upDir = await mkdtemp(join(tmpdir(), 'corral-named-'))
    up = await startNamedUpstreams(upDir)
    gitServer = await startGitServer('cloned through corral\n', join(upDir, 'named-upstream-ca'))
    h = await startHarness({ resolve: async () => [{ address: '127.0.0.1', family: 4 }], upstreamCaPem: [up.caPem] })
    ;({ workspaceId, token } = await h.workspace(caps(up.httpsPort, up.httpPort), 'idle', { raw: true }))
    sandboxes = await runtimeBehind(h, 'test-egress-')
    runtime = sandboxes.runtime
  })
  afterAll(async () => {
    await sandboxes?.close()
    await h?.close()
    await up?.close()
    await gitServer?.close()
  })

  it('resolves through corral and decides every connection, with dns and http rows', async () => {
    const ws = await runtime.provision({ workspaceId })
    const agent = await runtime.startAgent(workspaceId, {
      command: ['/bin/bash', '-c', SCRIPT],
      proxyToken: token,
      env: { HTTPS_PORT: String(up.httpsPort), HTTP_PORT: String(up.httpPort), NODE_CLIENT },
    })
    expect(await agent.exited).toEqual({ code: 0, signal: null })
    const out = async (f: string) => (await readFile(join(ws.dataDir, f), 'utf8')).trim()

    // getent and dig see one synthetic address, the same for both; AAAA is empty (NOERROR).
    const address = (await out('dig.txt'))
    expect(address).toMatch(/^100\.\d+\.\d+\.\d+$/)
    expect(await out('getent.txt')).toMatch(new RegExp(`^${address.replace(/\./g, '\\.')}\\s+api\\.allowed\\.dev`))
    expect(await out('dig-aaaa.txt')).toMatch(/status: NOERROR/)
    expect(await out('dig-aaaa.txt')).toMatch(/ANSWER: 0/)
    // The same over TCP (the resolver's fallback); a zone transfer is refused.
    expect(await out('dig-tcp.txt')).toBe(address)
    expect(await out('dig-axfr.txt')).toMatch(/Transfer failed|REFUSED/)
    // Allowed: curl (TLS and plain HTTP), Python's urllib, a client that dials the address itself.
    expect(await out('curl.txt')).toBe('hello api.allowed.dev')
    expect(await out('curl-plain.txt')).toBe('hello plain.allowed.dev')
    expect(await out('python.txt')).toBe('hello api.allowed.dev')
    expect(JSON.parse(await out('node.txt'))).toEqual({ addr: address, status: 'HTTP/1.1 200 OK', hello: true })
    // Denied: the connection succeeds, the request is refused by the proxy; the upstream never saw it.
    expect(await out('curl-denied.txt')).toBe('403')
    expect(up.hits.some((x) => x.startsWith('denied.elsewhere.dev'))).toBe(false)
    expect(up.hits).toEqual(expect.arrayContaining(['api.allowed.dev /curl', 'plain.allowed.dev /curl-plain', 'api.allowed.dev /python', 'api.allowed.dev /node']))
    // SSH is refused (the connection is closed).
    expect(await out('ssh.txt')).not.toMatch(/SSH-2\.0-(?!OpenSSH_9\.6)/)

    const rows = h.audit.decisions().filter((r) => r.workspace_id === workspaceId)
    const dnsRows = rows.filter((r) => r.policy_type === 'dns')
    expect(dnsRows.length).toBeGreaterThanOrEqual(5)
    for (const r of dnsRows) expect(r).toMatchObject({ phase: 'dns', decision: 'allow', capability_name: 'allowed-api' })
    expect(dnsRows.some((r) => r.destination === 'denied.elsewhere.dev')).toBe(false)
    const http = (path: string) => rows.filter((r) => r.policy_type === 'http' && r.path === path)
    for (const p of ['/curl', '/curl-plain', '/python', '/node']) expect(http(p)).toEqual([expect.objectContaining({ decision: 'allow', capability_name: 'allowed-api' })])
    expect(http('/curl-denied')).toEqual([expect.objectContaining({ decision: 'deny', reason: 'no_match', phase: 'request_headers', destination: 'denied.elsewhere.dev' })])
    expect(rows.find((r) => r.detail?.protocol === 'ssh')).toMatchObject({ decision: 'deny', destination: 'api.allowed.dev', detail: { port: 22 } })
  })

  it('a UDP send is refused with one row naming destination and port, and reaches nothing', async () => {
    const w = await h.workspace(caps(up.httpsPort, up.httpPort), 'idle', { raw: true })
    const ws = await runtime.provision({ workspaceId: w.workspaceId })
    const sink = createSocket('udp4')
    let received = 0
    sink.on('message', () => received++)
    await new Promise<void>((r) => sink.bind(0, '0.0.0.0', r))
    const hostAddress = Object.values(networkInterfaces()).flat().find((i) => i && i.family === 'IPv4' && !i.internal)?.address ?? '192.0.2.1'
    const script = String.raw`
unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy
cd /data
python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print(s.sendto(b'x', ('198.51.100.7', 9999)))" > python.txt 2>&1
node -e "const s = require('dgram').createSocket('udp4'); s.send('hello', Number(process.env.SINK_PORT), process.env.SINK_HOST, (e) => { console.log(e ? e.code : 'sent'); s.close() })" > node.txt 2>&1
dig +time=1 +tries=1 @1.1.1.1 api.allowed.dev > dig.txt 2>&1; echo "exit $?" >> dig.txt
ADDR=$(getent hosts api.allowed.dev | cut -d' ' -f1)
python3 -c "import socket, sys; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'quic?', (sys.argv[1], 443))" "$ADDR" > quic.txt 2>&1
echo "$ADDR" > addr.txt
`
    const agent = await runtime.startAgent(w.workspaceId, { command: ['/bin/bash', '-c', script], proxyToken: w.token, env: { SINK_PORT: String((sink.address()).port), SINK_HOST: hostAddress } })
    expect(await agent.exited).toEqual({ code: 0, signal: null })
    const out = async (f: string) => (await readFile(join(ws.dataDir, f), 'utf8')).trim()
    // The send itself succeeds (the datagram went into the sandbox's tun device), nothing answers.
    expect(await out('python.txt')).toBe('1')
    expect(await out('node.txt')).toBe('sent')
    expect(await out('dig.txt')).toMatch(/timed out|no servers could be reached/)
    const address = await out('addr.txt')
    expect(address).toMatch(/^100\./)
    const udpRows = async (n: number) => {
      for (let i = 0; i < 100 && h.audit.decisions().filter((r) => r.workspace_id === w.workspaceId && r.detail?.protocol === 'udp').length < n; i++) await sleep(50)
      return h.audit.decisions().filter((r) => r.workspace_id === w.workspaceId && r.detail?.protocol === 'udp')
    }
    const rows = await udpRows(4)
    const of = (destination: string, port: number) => rows.filter((r) => r.destination === destination && r.detail?.port === port)
    for (const [d, p] of [['198.51.100.7', 9999], [hostAddress, sink.address().port], ['1.1.1.1', 53]] as const) {
      expect(of(d, p), `${d}:${p}`).toEqual([expect.objectContaining({ decision: 'deny', reason: 'no_match', policy_type: 'http', detail: expect.objectContaining({ egress: 'transparent', protocol: 'udp' }) })])
    }
    // A datagram to a synthetic address names the name it was resolved for.
    expect(of('api.allowed.dev', 443)).toEqual([expect.objectContaining({ decision: 'deny', detail: expect.objectContaining({ address }) })])
    expect(rows).toHaveLength(4)
    expect(received).toBe(0)
    sink.close()
  })

  it('a UDP flood writes a bounded number of rows', async () => {
    // One workspace sends 2,000 datagrams to one destination, another one datagram to each of 300
    // ports (fewer than the tun device's queue holds between two reads of the init).
    const flood = async (jobs: string) => {
      const w = await h.workspace(caps(up.httpsPort, up.httpPort), 'idle', { raw: true })
      await runtime.provision({ workspaceId: w.workspaceId })
      const script = String.raw`
node -e "
const s = require('dgram').createSocket('udp4')
const jobs = ${jobs}
const next = () => { const j = jobs.shift(); if (!j) { s.close(); return } s.send('x', j[0], j[1], () => next()) }
next()
"
`
      const agent = await runtime.startAgent(w.workspaceId, { command: ['/bin/bash', '-c', script], proxyToken: w.token })
      expect(await agent.exited).toEqual({ code: 0, signal: null })
      const udp = () => h.audit.decisions().filter((r) => r.workspace_id === w.workspaceId && r.detail?.protocol === 'udp')
      for (let i = 0; i < 100 && udp().length < 5; i++) await sleep(50)
      return udp()
    }
    const one = await flood(`Array.from({ length: 2000 }, () => [9000, '198.51.100.20'])`)
    expect(one).toEqual([expect.objectContaining({ decision: 'deny', destination: '198.51.100.20', detail: expect.objectContaining({ port: 9000 }) })])
    const spread = await flood(`Array.from({ length: 300 }, (_, i) => [i + 1, '198.51.100.21'])`)
    expect(spread.length).toBeGreaterThanOrEqual(5)
    for (const r of spread) expect(r).toMatchObject({ decision: 'deny', destination: '198.51.100.21' })
    // Rows are bounded per workspace (a burst of 5, then 5 a second), far below the 300 reports.
    expect(spread.length).toBeLessThan(150)
  })

  it('opted out (transparentEgress: false): no resolver and no route, only HTTPS_PROXY', async () => {
    const optedOut = localRuntime({ ...sandboxes.options, transparentEgress: false })
    const other = await h.workspace(caps(up.httpsPort, up.httpPort), 'idle', { raw: true })
    const ws = await optedOut.provision({ workspaceId: other.workspaceId })
    const script = String.raw`
cd /data
getent hosts api.allowed.dev > getent.txt 2>&1; echo "exit $?" >> getent.txt
node -e "require('net').connect(443, '100.64.0.7').on('error', (e) => console.log(e.code)).on('connect', () => console.log('connected'))" > direct.txt 2>&1
curl -sS --max-time 10 https://api.allowed.dev:$HTTPS_PORT/via-proxy > curl.txt 2>&1
`
    const agent = await optedOut.startAgent(other.workspaceId, { command: ['/bin/bash', '-c', script], proxyToken: other.token, env: { HTTPS_PORT: String(up.httpsPort) } })
    expect(await agent.exited).toEqual({ code: 0, signal: null })
    const out = async (f: string) => (await readFile(join(ws.dataDir, f), 'utf8')).trim()
    expect(await out('getent.txt')).toBe('exit 2')
    expect(await out('direct.txt')).toBe('ENETUNREACH')
    expect(await out('curl.txt')).toBe('hello api.allowed.dev')
    expect(h.audit.decisions().filter((r) => r.workspace_id === other.workspaceId && r.policy_type === 'dns')).toEqual([])
    await optedOut.close()
  })

  it('git clone over https with HTTPS_PROXY unset: the dns row, then one allowed http row per request', async () => {
    const gitCaps = `
- name: git
  type: http
  allow:
    - domains: ["git.allowed.dev:${gitServer.port}"]
      methods: [GET, POST]
      allow_private: ["127.0.0.0/8"]
`
    const w = await h.workspace(gitCaps, 'idle', { raw: true })
    const ws = await runtime.provision({ workspaceId: w.workspaceId })
    const script = String.raw`
unset HTTPS_PROXY https_proxy HTTP_PROXY http_proxy
cd /data
git clone -q https://git.allowed.dev:$GIT_PORT/repo.git cloned > clone.txt 2>&1; echo "exit $?" >> clone.txt
`
    const agent = await runtime.startAgent(w.workspaceId, { command: ['/bin/bash', '-c', script], proxyToken: w.token, env: { GIT_PORT: String(gitServer.port) } })
    expect(await agent.exited).toEqual({ code: 0, signal: null })
    const rowsNow = h.audit.decisions().filter((r) => r.workspace_id === w.workspaceId)
    expect((await readFile(join(ws.dataDir, 'clone.txt'), 'utf8')).trim(), JSON.stringify(rowsNow.map((r) => [r.path, r.decision, r.reason, r.detail]))).toBe('exit 0')
    expect(await readFile(join(ws.dataDir, 'cloned', 'README.md'), 'utf8')).toBe('cloned through corral\n')
    const rows = h.audit.decisions().filter((r) => r.workspace_id === w.workspaceId)
    expect(rows.some((r) => r.policy_type === 'dns' && r.destination === 'git.allowed.dev' && r.capability_name === 'git')).toBe(true)
    const http = rows.filter((r) => r.policy_type === 'http')
    expect(http.length).toBeGreaterThanOrEqual(2)
    for (const r of http) expect(r).toMatchObject({ decision: 'allow', destination: 'git.allowed.dev', capability_name: 'git' })
    expect(http.map((r) => r.path)).toContain('/repo.git/git-upload-pack')
  })

  it('one workspace opts out through its pack environment; the runtime keeps it for the others', async () => {
    const w = await h.workspace(caps(up.httpsPort, up.httpPort), 'idle', { raw: true })
    const ws = await runtime.provision({ workspaceId: w.workspaceId })
    const script = String.raw`
cd /data
getent hosts api.allowed.dev > getent.txt 2>&1; echo "exit $?" >> getent.txt
[ -e /etc/resolv.conf ] && echo present > resolv.txt || echo absent > resolv.txt
`
    const agent = await runtime.startAgent(w.workspaceId, { command: ['/bin/bash', '-c', script], proxyToken: w.token, baseEnv: { CORRAL_TRANSPARENT_EGRESS: 'off' } })
    expect(await agent.exited).toEqual({ code: 0, signal: null })
    expect((await readFile(join(ws.dataDir, 'getent.txt'), 'utf8')).trim()).toBe('exit 2')
    expect((await readFile(join(ws.dataDir, 'resolv.txt'), 'utf8')).trim()).toBe('absent')
  })
})
