// The few parts of `ws` (8.x) the fake API server uses; the package ships no types and
// @types/ws is not installed. Kept to the calls made in server.ts and exec.ts.
declare module 'ws' {
  import type { IncomingMessage } from 'node:http'
  import type { Duplex } from 'node:stream'
  import { EventEmitter } from 'node:events'

  export class WebSocket extends EventEmitter {
    readonly OPEN: 1
    readonly CLOSED: 3
    readonly readyState: number
    readonly protocol: string
    send(data: Buffer | string): void
    close(code?: number): void
    terminate(): void
  }

  export class WebSocketServer extends EventEmitter {
    constructor(options: { noServer: true; handleProtocols?: (protocols: Set<string>, req: IncomingMessage) => string | false })
    readonly clients: Set<WebSocket>
    handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, callback: (ws: WebSocket) => void): void
  }
}
