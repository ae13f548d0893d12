// MCP tool calls under typed policy: the official SDK client against the SDK's McpServer over
// streamable HTTP (sessions; SSE answers and JSON answers), through the proxy with the corral CA.
// Every JSON-RPC message is decided by the rule's `mcp` block and has its decision row.
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { McpError } from '@modelcontextprotocol/sdk/types.js'
import { isStaticAuthProvider } from '../../src/policy/index.js'
import { OrgMaterialAdmin, Sealer, loadMasterKey } from '../../src/secrets/index.js'
import { AuditUnavailableError } from '../../src/audit/index.js'
import type { AuditEvent, NewAuditEvent } from '../../src/contract/index.js'
import { RecordingAudit, startHarness, type Harness } from './harness.js'
import { MCP_CAPS, mcpClient, mcpRows, mcpUpstream, type McpUpstream } from './mcp-upstream.js'

async function rejection(p: Promise<unknown>): Promise<McpError> {
  try {
    await p
  } catch (err) {
    return err as McpError
  }
  throw new Error('the call was not refused')
}

describe.each([
  { answer: 'SSE', json: false },
  { answer: 'JSON', json: true },
])('MCP through the proxy, answers as $answer', ({ json }) => {
  let h: Harness
  let server: McpUpstream
  let token: string
  let url: string
  beforeAll(async () => {
    h = await startHarness()
    server = mcpUpstream({ json })
    h.up.handler.current = server.handle
    token = (await h.workspace(MCP_CAPS)).token
    url = `https://127.0.0.1:${h.up.httpsPort}/mcp`
  })
  afterAll(async () => {
    await server?.close()
    await h?.close()
  })

  it('an allowed tool call reaches the server and its row names server, method, tool and rule', async () => {
    const c = await mcpClient(h, token, url)
    try {
      const out = await c.client.callTool({ name: 'echo', arguments: { message: 'hi there' } })
      expect(out.content).toEqual([{ type: 'text', text: 'echo: hi there' }])
    } finally {
      await c.close()
    }
    const rows = await h.audit.waitForDecisions(1)
    const row = mcpRows(rows, 'tools/call').find((r) => r.detail?.mcp_tool === 'echo')!
    expect(row).toMatchObject({ decision: 'allow', capability_name: 'tools', method: 'POST', path: '/mcp' })
    expect(row.detail).toMatchObject({ mcp_server: 'test-mcp', mcp_kind: 'request', mcp_rule: 'tools/echo', rule: 'mcp', upstream_status: 200 })
    // The session the server opened at initialize came back on the call (Mcp-Session-Id relayed both ways).
    expect(server.received.find((m) => m.method === 'tools/call' && m.name === 'echo')?.session).toMatch(/^[0-9a-f-]{36}$/)
    // The lifecycle went through too, each message with its row.
    expect(mcpRows(h.audit.decisions(), 'initialize')[0]).toMatchObject({ decision: 'allow', detail: { mcp_rule: 'lifecycle' } })
    expect(mcpRows(h.audit.decisions(), 'notifications/initialized')[0]).toMatchObject({ decision: 'allow', detail: { mcp_kind: 'notification' } })
  })

  it('a tool the policy does not name is refused with a JSON-RPC error the client shows; the server never sees it', async () => {
    const c = await mcpClient(h, token, url)
    try {
      const err = await rejection(c.client.callTool({ name: 'delete_repo', arguments: { repo: 'acme/app' } }))
      expect(err).toBeInstanceOf(McpError)
      expect(err.code).toBe(-32001)
      expect(err.message).toMatch(/Denied by corral policy \(no_match\): tool "delete_repo" is not allowed on MCP server "test-mcp"/)
      // The session goes on: the next allowed call works.
      expect((await c.client.callTool({ name: 'add', arguments: { a: 2, b: 3 } })).content).toEqual([{ type: 'text', text: '5' }])
    } finally {
      await c.close()
    }
    expect(server.received.some((m) => m.name === 'delete_repo')).toBe(false)
    const row = mcpRows(h.audit.decisions(), 'tools/call').find((r) => r.detail?.mcp_tool === 'delete_repo')!
    expect(row).toMatchObject({ decision: 'deny', reason: 'no_match', phase: 'request_body', detail: { mcp_server: 'test-mcp', mcp_rule: 'tools' } })
  })

  it('arguments decide: the CEL condition over typed arguments allows some calls and refuses others', async () => {
    const c = await mcpClient(h, token, url)
    try {
      expect((await c.client.callTool({ name: 'echo', arguments: { message: 'hi', times: 2 } })).content).toEqual([{ type: 'text', text: 'echo: hi' }])
      const tooMany = await rejection(c.client.callTool({ name: 'echo', arguments: { message: 'hi', times: 5 } }))
      expect(tooMany.message).toMatch(/do not satisfy its condition/)
      const wrongPrefix = await rejection(c.client.callTool({ name: 'echo', arguments: { message: 'bye' } }))
      expect(wrongPrefix.code).toBe(-32001)
      // Not matching the declared input_schema: invalid params, with the schema's complaint.
      const extra = await rejection(c.client.callTool({ name: 'echo', arguments: { message: 'hi', extra: true } }))
      expect(extra.code).toBe(-32602)
      expect(extra.message).toMatch(/do not match its input_schema/)
      const wrongType = await rejection(c.client.callTool({ name: 'echo', arguments: { message: 'hi', times: 1.5 } }))
      expect(wrongType.code).toBe(-32602)
    } finally {
      await c.close()
    }
    expect(server.received.filter((m) => m.name === 'echo').map((m) => m.args)).not.toContainEqual({ message: 'bye' })
    const denied = mcpRows(h.audit.decisions(), 'tools/call').filter((r) => r.decision === 'deny' && r.detail?.mcp_tool === 'echo')
    expect(denied.map((r) => r.reason).sort()).toEqual(['no_match', 'no_match', 'schema_violation', 'schema_violation'])
  })

  it('tools/list, resources/list and prompts/list show only what the policy allows', async () => {
    const c = await mcpClient(h, token, url)
    try {
      expect((await c.client.listTools()).tools.map((t) => t.name).sort()).toEqual(['add', 'echo'])
      expect((await c.client.listResources()).resources.map((r) => r.uri)).toEqual(['docs://readme'])
      expect((await c.client.listPrompts()).prompts.map((p) => p.name)).toEqual(['greet'])
    } finally {
      await c.close()
    }
    const row = mcpRows(h.audit.decisions(), 'tools/list').at(-1)!
    expect(row).toMatchObject({ decision: 'allow', detail: { mcp_rule: 'list', mcp_filtered: 3 } })
  })

  it('resources/read by URI and prompts/get by name and arguments', async () => {
    const c = await mcpClient(h, token, url)
    try {
      expect((await c.client.readResource({ uri: 'docs://readme' })).contents[0]).toMatchObject({ text: 'read me' })
      expect((await rejection(c.client.readResource({ uri: 'docs://secret' }))).message).toMatch(/resource "docs:\/\/secret" is not allowed/)
      expect((await c.client.getPrompt({ name: 'greet', arguments: { who: 'corral' } })).messages).toHaveLength(1)
      expect((await rejection(c.client.getPrompt({ name: 'greet', arguments: { who: 'mallory' } }))).code).toBe(-32001)
    } finally {
      await c.close()
    }
    expect(mcpRows(h.audit.decisions(), 'resources/read').map((r) => [r.decision, r.detail?.mcp_resource])).toEqual(expect.arrayContaining([['allow', 'docs://readme'], ['deny', 'docs://secret']]))
    expect(mcpRows(h.audit.decisions(), 'prompts/get').map((r) => [r.decision, r.detail?.mcp_prompt])).toEqual(expect.arrayContaining([['allow', 'greet'], ['deny', 'greet']]))
  })

  it('a method the policy does not name is refused by the default (deny)', async () => {
    const c = await mcpClient(h, token, url)
    try {
      const err = await rejection(c.client.setLoggingLevel('debug'))
      expect(err.message).toMatch(/method "logging\/setLevel" is not allowed/)
    } finally {
      await c.close()
    }
  })
})

describe('MCP credentials and per-tool budgets', () => {
  let h: Harness
  let server: McpUpstream
  let url: string
  const TOKEN = 'ghp_mcp_server_token_0123456789'
  const CAPS = `${MCP_CAPS}  transforms:
    - auth: {credential: mcp-bot, provider: github}
  budgets:
    counters:
      - {name: echo-calls, source: mcp.calls, tools: [echo], workspace: {max: 2}}
      - {name: all-calls, source: mcp.calls, workspace: {max: 100}}
`
  beforeAll(async () => {
    h = await startHarness()
    server = mcpUpstream({ json: false })
    h.up.handler.current = server.handle
    const admin = new OrgMaterialAdmin(h.store, new Sealer(await loadMasterKey(join(h.dir, 'data'))), h.audit, isStaticAuthProvider)
    await admin.createCredential({ orgId: h.orgId, userId: h.userId }, { name: 'mcp-bot', provider: 'github', kind: 'static_token', token: TOKEN })
    url = `https://127.0.0.1:${h.up.httpsPort}/mcp`
  })
  afterAll(async () => {
    await server?.close()
    await h?.close()
  })

  it('the server gets the credential the proxy injects; the agent never holds it', async () => {
    const { token } = await h.workspace(CAPS)
    const c = await mcpClient(h, token, url)
    try {
      const out = await c.client.callTool({ name: 'echo', arguments: { message: `hi ${'x'}` } })
      expect(JSON.stringify(out)).not.toContain(TOKEN)
    } finally {
      await c.close()
    }
    expect(server.authorizations.length).toBeGreaterThan(0)
    expect(server.authorizations.every((a) => a === `Bearer ${TOKEN}`)).toBe(true)
    expect(mcpRows(h.audit.decisions(), 'tools/call').at(-1)).toMatchObject({ decision: 'allow', auth_used: ['mcp-bot'] })
  })

  it('a counter of one tool debits its calls only, and refuses the call past its max as a JSON-RPC error', async () => {
    const { token, workspaceId } = await h.workspace(CAPS)
    const c = await mcpClient(h, token, url)
    try {
      await c.client.callTool({ name: 'add', arguments: { a: 1, b: 1 } })
      await c.client.callTool({ name: 'echo', arguments: { message: 'hi 1' } })
      await c.client.callTool({ name: 'echo', arguments: { message: 'hi 2' } })
      const err = await rejection(c.client.callTool({ name: 'echo', arguments: { message: 'hi 3' } }))
      expect(err.code).toBe(-32001)
      expect(err.message).toMatch(/budget_exhausted/)
      // Other tools are not counted against echo's budget.
      expect((await c.client.callTool({ name: 'add', arguments: { a: 2, b: 2 } })).content).toEqual([{ type: 'text', text: '4' }])
    } finally {
      await c.close()
    }
    const calls = mcpRows(await h.audit.waitForDecisions(0), 'tools/call').filter((r) => r.workspace_id === workspaceId)
    expect(calls.map((r) => [r.detail?.mcp_tool, r.decision, r.debits?.['echo-calls'] ?? null, r.debits?.['all-calls'] ?? null]).sort()).toEqual([
      ['add', 'allow', 0, 1],
      ['add', 'allow', 0, 1],
      ['echo', 'allow', 1, 1],
      ['echo', 'allow', 1, 1],
      ['echo', 'deny', null, null],
    ])
    expect(calls.find((r) => r.decision === 'deny')).toMatchObject({ reason: 'budget_exhausted', detail: { counter: 'echo-calls' } })
    expect(server.received.filter((m) => m.name === 'echo').map((m) => m.args)).not.toContainEqual({ message: 'hi 3' })
  })
})

describe("a batch's rows are durable before it leaves", () => {
  /** Refuses the rows of a batch's second message, the way the audit writer refuses when it cannot keep up. */
  class RefusingAudit extends RecordingAudit {
    override async emit(event: NewAuditEvent): Promise<AuditEvent> {
      if (event.detail?.mcp_batch_index === 1) throw new AuditUnavailableError('queue_full', 2, 'the audit log is not keeping up')
      return super.emit(event)
    }
  }
  const audit = new RefusingAudit()
  let h: Harness
  let hits = 0
  beforeAll(async () => {
    h = await startHarness({ audit })
    h.up.handler.current = (req, res) => {
      hits++
      req.resume()
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('[]')
    }
  })
  afterAll(() => h?.close())

  it.each([
    ['an allowed batch', [1, 'echo'], 503],
    ['a refused batch', [1, 'delete_repo'], 503],
  ] as const)('%s whose other rows cannot be written is answered audit_unavailable and not forwarded', async (_shape, [id, second], status) => {
    const { token } = await h.workspace(MCP_CAPS)
    const body = JSON.stringify([
      { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { message: 'hi' } } },
      { jsonrpc: '2.0', id: id + 1, method: 'tools/call', params: { name: second, arguments: { message: 'hi', repo: 'x' } } },
    ])
    const before = hits
    const res = await h.fetch(`https://127.0.0.1:${h.up.httpsPort}/mcp`, { token, method: 'POST', body, headers: { 'content-type': 'application/json' } })
    expect(res.status).toBe(status)
    expect(res.headers.get('x-corral-deny-reason')).toBe('audit_unavailable')
    expect(hits).toBe(before)
  })
})
