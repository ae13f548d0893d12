// A real MCP server (the official SDK's McpServer over its streamable HTTP transport, with
// sessions) behind the proxy harness's HTTPS upstream, and the SDK's client reaching it through
// the proxy the way an agent would (CONNECT with the capability token, the corral CA trusted).
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { ProxyAgent, fetch as undiciFetch } from 'undici'
import { z } from 'zod'
import type { AuditEvent } from '../../src/contract/index.js'
import type { Harness } from './harness.js'

export interface McpUpstream {
  /** Every JSON-RPC method the server received (what got past the proxy). */
  received: { method: string; name?: string; args?: unknown; session?: string }[]
  /** Authorization headers the server saw. */
  authorizations: string[]
  handle(req: IncomingMessage, res: ServerResponse): void
  close(): Promise<void>
}

/** An MCP server with tools echo, add, delete_repo, ｅcho (full-width e), a resource and a prompt. `json`: answer POSTs with JSON instead of SSE. */
export function mcpUpstream(opts: { json?: boolean } = {}): McpUpstream {
  const received: McpUpstream['received'] = []
  const authorizations: string[] = []
  const sessions = new Map<string, StreamableHTTPServerTransport>()
  const build = (): McpServer => {
    const server = new McpServer({ name: 'test-mcp', version: '1.0.0' })
    server.registerTool('echo', { description: 'echo', inputSchema: { message: z.string(), times: z.number().int().optional() } }, async ({ message }) => ({ content: [{ type: 'text', text: `echo: ${message}` }] }))
    server.registerTool('add', { description: 'add', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }))
    server.registerTool('delete_repo', { description: 'dangerous', inputSchema: { repo: z.string() } }, async () => ({ content: [{ type: 'text', text: 'deleted' }] }))
    // The SDK warns about names outside [A-Za-z0-9_.-]; this one is on purpose.
    const warn = console.warn
    console.warn = () => {}
    try {
      server.registerTool('ｅcho', { description: 'look-alike', inputSchema: { message: z.string() } }, async () => ({ content: [{ type: 'text', text: 'look-alike ran' }] }))
      server.registerTool('Echo', { description: 'other case', inputSchema: { message: z.string() } }, async () => ({ content: [{ type: 'text', text: 'other case ran' }] }))
    } finally {
      console.warn = warn
    }
    server.registerResource('readme', 'docs://readme', { description: 'readme' }, async (uri) => ({ contents: [{ uri: uri.href, text: 'read me' }] }))
    server.registerResource('secret', 'docs://secret', { description: 'secret' }, async (uri) => ({ contents: [{ uri: uri.href, text: 'secret' }] }))
    server.registerPrompt('greet', { description: 'greet', argsSchema: { who: z.string() } }, async ({ who }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `hello ${who}` } }] }))
    return server
  }
  const note = (body: unknown, session: string | undefined): void => {
    for (const m of Array.isArray(body) ? body : [body]) {
      const o = m as { method?: string; params?: { name?: string; arguments?: unknown } }
      if (typeof o?.method === 'string') received.push({ method: o.method, ...(o.params?.name ? { name: o.params.name } : {}), ...(o.params?.arguments ? { args: o.params.arguments } : {}), ...(session ? { session } : {}) })
    }
  }
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.headers.authorization) authorizations.push(req.headers.authorization)
    let body: unknown
    if (req.method === 'POST') {
      const chunks: Buffer[] = []
      for await (const c of req) chunks.push(c as Buffer)
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      note(body, typeof req.headers['mcp-session-id'] === 'string' ? req.headers['mcp-session-id'] : undefined)
    }
    const sid = req.headers['mcp-session-id']
    let transport = typeof sid === 'string' ? sessions.get(sid) : undefined
    if (!transport) {
      transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), enableJsonResponse: opts.json ?? false, onsessioninitialized: (id) => void sessions.set(id, transport!) })
      await build().connect(transport)
    }
    await transport.handleRequest(req, res, body)
  }
  return {
    received,
    authorizations,
    handle: (req, res) => void handle(req, res).catch((err) => {
      if (!res.headersSent) res.writeHead(500)
      res.end(String(err))
    }),
    async close() {
      await Promise.all([...sessions.values()].map((t) => t.close().catch(() => {})))
    },
  }
}

/** The SDK client connected through the proxy with `token`. */
export async function mcpClient(h: Harness, token: string, url: string): Promise<{ client: Client; close(): Promise<void> }> {
  const agent = new ProxyAgent({ uri: h.proxyUrl, token: `Bearer ${token}`, requestTls: { ca: h.proxy.ca.certPem }, proxyTunnel: true })
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    fetch: ((u: string | URL, init?: RequestInit) => undiciFetch(u, { ...(init as object), dispatcher: agent })) as unknown as typeof fetch,
  })
  const client = new Client({ name: 'corral-test', version: '1.0.0' })
  await client.connect(transport)
  return {
    client,
    async close() {
      await client.close().catch(() => {})
      await agent.close().catch(() => {})
    },
  }
}

/** A policy for the server above (and the stand-ins in test/security/mcp-calls.test.ts). */
export const MCP_CAPS = `- name: tools
  type: http
  allow:
    - name: mcp
      domains: ["127.0.0.1"]
      methods: [POST, GET, DELETE]
      paths: [/mcp]
      mcp:
        server: test-mcp
        tools:
          - name: echo
            input_schema: {type: object, properties: {message: {type: string}, times: {type: integer}}, required: [message], additionalProperties: false}
            when: 'args.message.startsWith("hi") && (!has(args.times) || args.times < 3)'
          - name: add
        resources:
          - uri: docs://readme
        prompts:
          - name: greet
            when: 'args.who == "corral"'
`

/** The decision rows that name an MCP method. */
export function mcpRows(rows: AuditEvent[], method?: string): AuditEvent[] {
  return rows.filter((r) => r.detail?.mcp_method !== undefined && (method === undefined || r.detail.mcp_method === method))
}

