// HTTP/2 from inside a bubblewrap workspace: the agent's own curl (which knows only the proxy
// variables and the corral CA the sandbox trusts) negotiates h2 inside its CONNECT tunnel to the
// real proxy, which speaks h2 to the upstream; the row says protocol h2.
import { randomUUID } from 'node:crypto'
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { packageRoot } from '../../src/runtime/layout.js'
import { localRuntime, type LocalRuntimeUnderTest } from '../runtime/drivers.js'
import { bwrapAvailable } from '../runtime/helpers.js'
import { onLoopback } from '../helpers/loopback-caps.js'
import { startHarness, type Harness } from './harness.js'
import { startH2Upstream, type H2Upstream } from './h2-harness.js'

const available = await bwrapAvailable()
if (!available && process.env.CORRAL_TEST_REQUIRE_BWRAP === '1') throw new Error('bubblewrap is required (CORRAL_TEST_REQUIRE_BWRAP=1) but does not work here')

describe.skipIf(!available)('HTTP/2 from a bubblewrap workspace', () => {
  let h: Harness
  let up: H2Upstream
  let root: string
  let runtime: LocalRuntimeUnderTest

  beforeAll(async () => {
    h = await startHarness()
    up = await startH2Upstream(h)
    up.handler.current = (req, res) => res.end(`h2 upstream saw ${req.httpVersion}`)
    await mkdir(join(packageRoot(), '.corral'), { recursive: true })
    root = await mkdtemp(join(packageRoot(), '.corral', 'test-h2-'))
    await writeFile(join(root, 'corral-ca.pem'), h.proxy.ca.certPem)
    runtime = localRuntime({ root, proxy: { host: '127.0.0.1', port: Number(new URL(h.proxyUrl).port) }, caCertPath: join(root, 'corral-ca.pem'), stopGraceMs: 1000, warn: () => {} })
  })
  afterAll(async () => {
    await runtime?.close()
    await up?.close()
    await h?.close()
    if (root) await rm(root, { recursive: true, force: true })
  })

  it("the agent's curl --http2 gets h2 end to end, and the row says so", async () => {
    const caps = onLoopback(`
- name: api
  type: http
  allow:
    - domains: ["127.0.0.1"]
      methods: [GET]
      paths: ["/from-sandbox"]
`, up.port)
    const { token } = await h.workspace(caps, 'idle', { raw: true })
    const before = h.audit.decisions().length
    const ws = await runtime.provision({ workspaceId: `ws_h2_${randomUUID().slice(0, 8)}` })
    const agent = await runtime.startAgent(ws.workspaceId, {
      command: ['/bin/sh', '-c', `curl -sS --http2 --max-time 20 -w '\\n%{http_version}' https://127.0.0.1:${up.port}/from-sandbox > /data/out 2>&1; echo $? > /data/rc`],
      proxyToken: token,
    })
    await agent.exited
    expect(await readFile(join(ws.dataDir, 'out'), 'utf8')).toBe('h2 upstream saw 2.0\n2')
    expect((await readFile(join(ws.dataDir, 'rc'), 'utf8')).trim()).toBe('0')
    const [row] = (await h.audit.waitForDecisions(before + 1)).slice(before)
    expect(row).toMatchObject({ decision: 'allow', path: '/from-sandbox', detail: { protocol: 'h2', upstream_status: 200 } })
  })
})
