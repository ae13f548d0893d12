// The HTTP API on its socket: buildApp over the complete ServerDeps, then listen. Closing it
// refuses new requests and drains those in flight (SIGTERM, docs/reliability.md).
import type { FastifyInstance } from 'fastify'
import { buildApp, type ServerDeps } from '../server/index.js'

export interface RunningApi {
  readonly app: FastifyInstance
  /** `http://host:port`, without /v1. */
  readonly url: string
  stop(): Promise<void>
}

export async function startApi(deps: ServerDeps, listen: { host: string; port: number }): Promise<RunningApi> {
  const app = await buildApp(deps)
  try {
    await app.listen({ host: listen.host, port: listen.port })
  } catch (err) {
    await app.close().catch(() => {})
    throw err
  }
  const addr = app.server.address()
  const url = addr && typeof addr === 'object'
    ? `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`
    : `http://${listen.host}:${listen.port}`
  return { app, url, stop: () => app.close() }
}
