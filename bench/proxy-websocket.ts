// The WebSocket phase of bench/proxy.ts: one socket to the upstream's echo (/v1/ws), directly and
// through a proxy (CONNECT, TLS with the proxy's CA, the upgrade under policy). Two figures each:
// the round trip of one message at a time (p50/p99, the latency a message gains through the
// proxy) and messages per second with WINDOW messages in flight (one socket, both directions).
import { performance } from 'node:perf_hooks'
import { connect as tlsConnect, type TLSSocket } from 'node:tls'
import { WebSocket } from 'ws'
import { connectTunnel, type Via } from './proxy-h2.js'

const WINDOW = 64
const MESSAGE = JSON.stringify({ type: 'response.output_text.delta', delta: 'x'.repeat(200) })

export interface WsResult {
  round_trip_p50_ms: number
  round_trip_p99_ms: number
  messages_per_s: number
  errors: number
}

async function open(port: number, via: Via): Promise<WebSocket> {
  const target = `127.0.0.1:${port}`
  let ws: WebSocket
  if (!via.proxy) ws = new WebSocket(`wss://${target}/v1/ws`, { ca: via.upstreamCaPem, perMessageDeflate: false })
  else {
    const raw = await connectTunnel(via.proxy.url, target, via.proxy.token)
    const tls = await new Promise<TLSSocket>((resolve, reject) => {
      const t = tlsConnect({ socket: raw, host: '127.0.0.1', ca: via.proxy!.caPem }, () => resolve(t))
      t.once('error', reject)
    })
    ws = new WebSocket(`wss://${target}/v1/ws`, { createConnection: () => tls, perMessageDeflate: false })
  }
  await new Promise((resolve, reject) => {
    ws.once('open', resolve)
    ws.once('error', reject)
    ws.once('unexpected-response', (_q, res) => reject(new Error(`upgrade answered ${res.statusCode}`)))
  })
  return ws
}

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length ? s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! : 0
}
const round = (n: number): number => Math.round(n * 1000) / 1000

/** Round trips one at a time for `seconds / 2`, then a window of WINDOW in flight for `seconds / 2`. */
export async function measureWebSocket(port: number, via: Via, seconds: number): Promise<WsResult> {
  let errors = 0
  const ws = await open(port, via)
  ws.on('error', () => errors++)
  const rtts: number[] = []
  let end = performance.now() + (seconds * 1000) / 2
  while (performance.now() < end) {
    const t0 = performance.now()
    await new Promise<void>((r) => {
      ws.once('message', () => r())
      ws.send(MESSAGE)
    })
    rtts.push(performance.now() - t0)
  }
  let received = 0
  end = performance.now() + (seconds * 1000) / 2
  const t0 = performance.now()
  await new Promise<void>((resolve) => {
    let sent = 0
    const pump = (): void => {
      while (sent - received < WINDOW && performance.now() < end) {
        ws.send(MESSAGE)
        sent++
      }
      if (performance.now() >= end && received >= sent) resolve()
    }
    ws.on('message', () => {
      received++
      pump()
    })
    pump()
  })
  const elapsed = (performance.now() - t0) / 1000
  ws.close(1000)
  await new Promise((r) => ws.once('close', r))
  return { round_trip_p50_ms: round(pct(rtts, 50)), round_trip_p99_ms: round(pct(rtts, 99)), messages_per_s: Math.round(received / elapsed), errors }
}
