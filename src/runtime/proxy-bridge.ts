import { mkdir, rm } from 'node:fs/promises'
import net from 'node:net'
import { dirname } from 'node:path'
import type { ProxyAddress } from './runtime.js'
import { relay } from './relay.js'

/**
 * The host side of a workspace's only way out. The sandbox has no network interface but loopback;
 * this unix socket is bind-mounted into it, and every connection made to it is relayed to the
 * policy proxy's TCP listener. Nothing else is reachable: the bridge never looks at the bytes, so
 * it cannot be talked into connecting anywhere but the proxy.
 */
export class ProxyBridge {
  readonly socketPath: string
  readonly #proxy: ProxyAddress
  readonly #server: net.Server
  readonly #open = new Set<net.Socket>()

  private constructor(socketPath: string, proxy: ProxyAddress) {
    this.socketPath = socketPath
    this.#proxy = proxy
    this.#server = net.createServer({ allowHalfOpen: true }, (inner) => this.#accept(inner))
  }

  /** Listens on `socketPath` (replacing a stale socket left by a crash). */
  static async open(socketPath: string, proxy: ProxyAddress): Promise<ProxyBridge> {
    const bridge = new ProxyBridge(socketPath, proxy)
    await mkdir(dirname(socketPath), { recursive: true, mode: 0o700 })
    await rm(socketPath, { force: true })
    await new Promise<void>((resolve, reject) => {
      bridge.#server.once('error', reject)
      bridge.#server.listen(socketPath, () => {
        bridge.#server.off('error', reject)
        resolve()
      })
    })
    return bridge
  }

  #accept(inner: net.Socket): void {
    this.#open.add(inner)
    inner.once('close', () => this.#open.delete(inner))
    const upstream = net.createConnection({ host: this.#proxy.host, port: this.#proxy.port, allowHalfOpen: true })
    this.#open.add(upstream)
    upstream.once('close', () => this.#open.delete(upstream))
    relay(inner, upstream)
  }

  /** Stops accepting, cuts every open relay and removes the socket file. Idempotent. */
  async close(): Promise<void> {
    if (!this.#server.listening) return
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()))
    for (const s of this.#open) s.destroy()
    await closed
    await rm(this.socketPath, { force: true })
  }
}
