// An OpenTelemetry logs receiver on a real socket, as a collector's OTLP/HTTP receiver takes
// requests: POST /v1/logs, application/x-protobuf decoded with protobufjs from the OTLP .proto
// definitions (test/fixtures/otlp), application/json checked against the same definitions with
// protobufjs' fromObject/verify (the OTLP/JSON mapping). It records what it accepted and can be
// told to fail, throttle, stall or answer a partial success. It never uses corral's serializer.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { resolve } from 'node:path'
import protobuf from 'protobufjs'

const ROOT_DIR = resolve(import.meta.dirname, '../fixtures/otlp')

export interface ReceivedRecord {
  resource: Record<string, unknown>
  scope: string
  timeUnixNano: bigint
  severityNumber: number
  severityText: string
  eventName: string
  attributes: Record<string, unknown>
  body: unknown
}

export type ReceiverMode =
  | { kind: 'ok' }
  | { kind: 'status'; status: number; retryAfter?: string; times: number }
  | { kind: 'stall'; ms: number; times: number }
  | { kind: 'partial'; rejected: number; times: number }

let rootPromise: Promise<protobuf.Root> | undefined
export function otlpRoot(): Promise<protobuf.Root> {
  rootPromise ??= (async () => {
    const root = new protobuf.Root()
    root.resolvePath = (_origin, target) => resolve(ROOT_DIR, target)
    await root.load('opentelemetry/proto/collector/logs/v1/logs_service.proto', { keepCase: false })
    return root
  })()
  return rootPromise
}

/** An AnyValue as a plain value (kvlist → object, array → array, int → number). */
export function anyValue(v: Record<string, unknown> | undefined): unknown {
  if (!v) return undefined
  if ('stringValue' in v) return v.stringValue
  if ('boolValue' in v) return v.boolValue
  if ('intValue' in v) return Number(v.intValue)
  if ('doubleValue' in v) return v.doubleValue
  if ('arrayValue' in v) return ((v.arrayValue as { values?: Array<Record<string, unknown>> }).values ?? []).map(anyValue)
  if ('kvlistValue' in v) return keyValues((v.kvlistValue as { values?: KV[] }).values)
  return undefined
}
type KV = { key: string; value?: Record<string, unknown> }
function keyValues(kvs: KV[] | undefined): Record<string, unknown> {
  return Object.fromEntries((kvs ?? []).map((kv) => [kv.key, anyValue(kv.value)]))
}

export class OtlpReceiver {
  readonly records: ReceivedRecord[] = []
  /** Requests answered with a non-2xx (or stalled), in order. */
  readonly refused: number[] = []
  requests = 0
  mode: ReceiverMode = { kind: 'ok' }
  private server: Server | undefined

  private constructor(private readonly type: protobuf.Type, private readonly responseType: protobuf.Type, public port: number) {}

  static async start(port = 0): Promise<OtlpReceiver> {
    const root = await otlpRoot()
    const r = new OtlpReceiver(
      root.lookupType('opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest'),
      root.lookupType('opentelemetry.proto.collector.logs.v1.ExportLogsServiceResponse'), port)
    await r.listen()
    return r
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/v1/logs`
  }

  /** Distinct row ids received, in first-arrival order. */
  ids(): string[] {
    return [...new Set(this.records.map((r) => String(r.attributes['corral.audit.event_id'])))]
  }

  async listen(): Promise<void> {
    const server = createServer((req, res) => void this.handle(req, res))
    await new Promise<void>((ok) => server.listen(this.port, '127.0.0.1', ok))
    this.port = (server.address() as AddressInfo).port
    this.server = server
  }

  async close(): Promise<void> {
    const s = this.server
    this.server = undefined
    if (!s) return
    s.closeAllConnections()
    await new Promise<void>((ok) => s.close(() => ok()))
  }

  private decode(req: IncomingMessage, body: Buffer): Record<string, unknown> {
    const toObject = { longs: String, enums: Number, bytes: String, defaults: false, oneofs: false }
    if (req.headers['content-type'] === 'application/json') {
      const json = JSON.parse(body.toString('utf8')) as Record<string, unknown>
      const msg = this.type.fromObject(json)
      const err = this.type.verify(msg)
      if (err) throw new Error(`invalid OTLP/JSON: ${err}`)
      return this.type.toObject(msg, toObject)
    }
    if (req.headers['content-type'] !== 'application/x-protobuf') throw new Error(`content-type ${req.headers['content-type']}`)
    return this.type.toObject(this.type.decode(body), toObject)
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    this.requests++
    const mode = this.mode
    if (mode.kind !== 'ok' && mode.times-- <= 0) this.mode = { kind: 'ok' }
    if (mode.kind === 'status' && mode.times >= 0) {
      this.refused.push(mode.status)
      res.writeHead(mode.status, mode.retryAfter ? { 'retry-after': mode.retryAfter } : {}).end()
      return
    }
    let decoded: Record<string, unknown>
    try {
      if (req.method !== 'POST' || req.url !== '/v1/logs') throw new Error(`${req.method} ${req.url}`)
      decoded = this.decode(req, Buffer.concat(chunks))
    } catch (err) {
      res.writeHead(400).end(String(err))
      return
    }
    // A collector that stalls still takes the data it decoded; the sender gave up before the answer.
    this.take(decoded)
    if (mode.kind === 'stall' && mode.times >= 0) {
      this.refused.push(0)
      await new Promise((ok) => setTimeout(ok, mode.ms))
    }
    const partial = mode.kind === 'partial' && mode.times >= 0 ? { partialSuccess: { rejectedLogRecords: mode.rejected, errorMessage: 'rejected by test' } } : {}
    const json = req.headers['content-type'] === 'application/json'
    const answer = json ? Buffer.from(JSON.stringify(partial)) : Buffer.from(this.responseType.encode(this.responseType.fromObject(partial)).finish())
    if (!res.destroyed) res.writeHead(200, { 'content-type': json ? 'application/json' : 'application/x-protobuf' }).end(answer)
  }

  private take(decoded: Record<string, unknown>): void {
    type Scope = { scope?: { name?: string }; logRecords?: Array<Record<string, unknown>> }
    for (const rl of (decoded.resourceLogs ?? []) as Array<{ resource?: { attributes?: KV[] }; scopeLogs?: Scope[] }>) {
      const resource = keyValues(rl.resource?.attributes)
      for (const sl of rl.scopeLogs ?? []) {
        for (const lr of sl.logRecords ?? []) {
          this.records.push({
            resource, scope: sl.scope?.name ?? '', timeUnixNano: BigInt(String(lr.timeUnixNano ?? '0')),
            severityNumber: Number(lr.severityNumber ?? 0), severityText: String(lr.severityText ?? ''), eventName: String(lr.eventName ?? ''),
            attributes: keyValues(lr.attributes as KV[] | undefined), body: anyValue(lr.body as Record<string, unknown> | undefined),
          })
        }
      }
    }
  }
}
