// `corral serve --proxy-port` / CORRAL_PROXY_PORT: the outbound proxy listens on the port asked for
// (the flag wins over the environment), shown in the ready line and answering CONNECT there.
import { connect, createServer, type AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { startServe, type RunningServe } from '../helpers/serve.js'

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as AddressInfo
      srv.close(() => resolve(port))
    })
  })
}

/** Sends a CONNECT without a token and returns the proxy's status line. */
function connectStatus(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => s.write('CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n'))
    let buf = ''
    s.on('data', (c) => {
      buf += String(c)
      const nl = buf.indexOf('\r\n')
      if (nl >= 0) {
        s.destroy()
        resolve(buf.slice(0, nl))
      }
    })
    s.on('error', reject)
  })
}

describe('corral serve --proxy-port', () => {
  let serve: RunningServe | undefined
  afterEach(async () => {
    await serve?.stop()
    serve = undefined
  })

  it('listens on --proxy-port, which wins over CORRAL_PROXY_PORT', async () => {
    const [flagPort, envPort] = [await freePort(), await freePort()]
    serve = await startServe({ args: ['--proxy-port', String(flagPort)], env: { CORRAL_PROXY_PORT: String(envPort) } })
    expect(serve.output()).toContain(`proxy http://127.0.0.1:${flagPort}`)
    expect(await connectStatus(flagPort)).toMatch(/^HTTP\/1\.1 407 /) // the proxy's challenge: no token was sent
  })

  it('listens on CORRAL_PROXY_PORT when the flag is absent', async () => {
    const envPort = await freePort()
    serve = await startServe({ env: { CORRAL_PROXY_PORT: String(envPort) } })
    expect(serve.output()).toContain(`proxy http://127.0.0.1:${envPort}`)
    expect(await connectStatus(envPort)).toMatch(/^HTTP\/1\.1 407 /)
  })
})
