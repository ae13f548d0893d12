// What `corral dev` puts in the default org, through the public /v1 API with the admin key, so the
// demo works the way any user's setup would. Idempotent: each start brings the same names to the
// same state (the fake model's port may differ between starts, so the provider's URL and the
// role's policy are updated in place); nothing is deleted.
import { ApiError, rolesApi, type CorralClient } from '../client/index.js'
import type { CliAgentKind, ProviderKind } from '../contract/index.js'

export const DEMO = {
  provider: 'demo-model',
  model: 'demo-1',
  secret: 'demo-model-key',
  credential: 'demo-model',
  role: 'demo',
  /** The agent kinds' providers of the other APIs, and the key they are sent as a Bearer token. */
  openaiProvider: 'demo-openai',
  geminiProvider: 'demo-gemini',
  bearerCredential: 'demo-model-bearer',
  /** The fake model's key. Not a secret (the fake runs on loopback); it shows that the proxy injects it and the agent never holds it. */
  apiKey: 'corral-dev-demo-key',
} as const

/** A policy that opens one model provider's Messages API (docs/policy.md), as the demo and the e2e suites use it. */
export interface ModelPolicyOptions {
  /** A first comment line. */
  comment?: string
  /** The model's domain pattern: `127.0.0.1` or with its port, `127.0.0.1:8443`. */
  domain: string
  /** `allow_private` of the rule (a loopback model needs its range named). */
  allowPrivate?: readonly string[]
  /** The credential the proxy injects (the agent never holds it). */
  credential?: { name: string; provider: string }
  /** Ask the model for an uncompressed stream (so the proxy meters it without decoding). */
  identity?: boolean
  /** Output tokens metered from the SSE usage events (`message_delta`), with its ceilings. */
  outputTokens?: { reserve: number; failureCharge?: number; workspaceMax: number; taskMax?: number }
  /** The API's paths (default the Messages API's `/v1/messages`). */
  paths?: readonly string[]
  /** Output tokens metered from Gemini's stream (`usageMetadata`, ended by a `finishReason`) instead. */
  gemini?: boolean
  /** Model requests counted per workspace (a budget for APIs metered by another part). */
  requests?: { workspaceMax: number }
  /**
   * The Responses API's WebSocket too (Codex's default transport): a second rule for the `GET`
   * upgrade on these paths, and the output tokens of its `response.completed` messages metered.
   */
  socket?: { paths: readonly string[]; workspaceMax: number }
}

/** The caps.yaml text of a model-only policy. */
export function modelPolicy(o: ModelPolicyOptions): string {
  const lines = [
    ...(o.comment ? [`# ${o.comment}`] : []),
    '- name: model', '  type: http', '  allow:', '    - name: messages', `      domains: ["${o.domain}"]`,
    ...(o.allowPrivate ? [`      allow_private: [${o.allowPrivate.map((r) => `"${r}"`).join(', ')}]`] : []),
    '      methods: [POST]', `      paths: [${(o.paths ?? ['/v1/messages']).join(', ')}]`,
  ]
  if (o.socket) {
    // `Upgrade` is hop-by-hop (not in request.headers); the handshake's key tells an upgrade from a plain GET.
    lines.push('    - name: socket', `      domains: ["${o.domain}"]`, ...(o.allowPrivate ? [`      allow_private: [${o.allowPrivate.map((r) => `"${r}"`).join(', ')}]`] : []),
      '      methods: [GET]', `      paths: [${o.socket.paths.join(', ')}]`, '      match:', `        expr: '"sec-websocket-key" in request.headers'`)
  }
  const transforms = [
    ...(o.credential ? ['    - name: api-key', `      auth: {credential: ${o.credential.name}, provider: ${o.credential.provider}}`] : []),
    ...(o.identity ? ['    - name: identity', `      header: {name: Accept-Encoding, action: set, value: '"identity"'}`] : []),
  ]
  if (transforms.length) lines.push('  transforms:', ...transforms)
  const t = o.outputTokens
  if (t || o.requests || o.socket) lines.push('  budgets:', '    counters:')
  if (o.requests) lines.push('      - name: requests', '        source: request.count', `        workspace: {max: ${o.requests.workspaceMax}, ttl: 24h}`)
  if (o.socket) {
    lines.push('      - name: socket_output_tokens', '        source: websocket.message', '        direction: to_agent',
      `        value: 'event.type == "response.completed" ? event.data.response.usage.output_tokens : 0'`, `        workspace: {max: ${o.socket.workspaceMax}, ttl: 24h}`)
  }
  if (t) {
    const stream = o.gemini
      ? ['        value: int(event.data.usageMetadata.candidatesTokenCount)', "        terminal_cel: 'has(event.data.candidates) && event.data.candidates.exists(c, has(c.finishReason))'"]
      : ['        sse_event: message_delta', '        value: int(event.data.usage.output_tokens)', '        terminal_event_type: message_stop']
    lines.push(
      '      - name: output_tokens', '        source: response', '        requires_body: true', '        framing: sse',
      '        format: application/json', '        encoding: identity', '        status_codes: ["2xx"]', '        accumulator: max', ...stream,
      `        reserve_per_request: ${t.reserve}`, ...(t.failureCharge !== undefined ? [`        failure_charge: ${t.failureCharge}`] : []),
      `        workspace: {max: ${t.workspaceMax}, ttl: 24h}`, ...(t.taskMax !== undefined ? [`        task: {max: ${t.taskMax}, ttl: 1h}`] : []),
    )
  }
  return `${lines.join('\n')}\n`
}

/**
 * The demo role's policy: the fake model only (its loopback port named, so `allow_private`), the
 * credential injected by the proxy, output tokens metered from the SSE stream with a budget.
 * Every other destination is denied by default.
 */
export function demoCaps(modelPort: number): string {
  return modelPolicy({
    comment: "corral dev's demo policy: the scripted fake model on loopback, and nothing else.",
    domain: `127.0.0.1:${modelPort}`, allowPrivate: ['127.0.0.0/8'], credential: { name: DEMO.credential, provider: 'anthropic' }, identity: true,
    outputTokens: { reserve: 256, failureCharge: 16, workspaceMax: 100_000, taskMax: 20_000 },
  })
}

export interface SeedResult {
  provider_id: string
  role_id: string
  /** What this start changed, for the log (empty when everything was already in place). */
  changes: string[]
}

export async function seedDemo(client: CorralClient, modelUrl: string): Promise<SeedResult> {
  const changes: string[] = []
  const port = Number(new URL(modelUrl).port)
  const seed = seeder(client, changes)

  const provider = await seed.provider(DEMO.provider, 'anthropic', modelUrl, 'corral dev: the scripted fake model on loopback')
  // Secrets are create-or-replace; the credentials are created once and kept.
  await client.request('POST', '/secrets', { body: { name: DEMO.secret, value: DEMO.apiKey } })
  await seed.credential(DEMO.credential, 'anthropic')
  const roleId = await seed.role(DEMO.role, provider.id, demoCaps(port), 'corral dev: the demo agent role')

  // One role per agent kind, each on a provider of the API its CLI speaks — all the same fake model.
  await seed.credential(DEMO.bearerCredential, 'openai')
  const byApi = {
    anthropic: provider,
    openai: await seed.provider(DEMO.openaiProvider, 'openai', `${modelUrl}/v1`, 'corral dev: the fake model, OpenAI APIs'),
    gemini: await seed.provider(DEMO.geminiProvider, 'gemini', modelUrl, 'corral dev: the fake model, Gemini API'),
  }
  for (const { kind, api } of DEMO_KIND_ROLES) {
    await seed.role(kind, byApi[api].id, kindCaps(api, port), `corral dev: ${kind} against the fake model`, kind)
  }
  return { provider_id: provider.id, role_id: roleId, changes }
}

/** The agent kinds corral dev seeds a role for (named after the kind), and the API each one's CLI speaks. */
export const DEMO_KIND_ROLES: ReadonlyArray<{ kind: CliAgentKind; api: ProviderKind }> = [
  { kind: 'claude-code', api: 'anthropic' },
  { kind: 'codex', api: 'openai' },
  { kind: 'gemini-cli', api: 'gemini' },
  { kind: 'opencode', api: 'anthropic' },
]

/** An agent kind's demo policy: the fake model's API for that CLI only, its key injected, its use budgeted. */
export function kindCaps(api: ProviderKind, modelPort: number): string {
  if (api === 'anthropic') return demoCaps(modelPort)
  const common = { domain: `127.0.0.1:${modelPort}`, allowPrivate: ['127.0.0.0/8'], credential: { name: DEMO.bearerCredential, provider: 'openai' }, identity: true }
  return api === 'gemini'
    ? modelPolicy({ ...common, comment: "corral dev's gemini-cli policy: the fake model's Gemini API, and nothing else.", paths: ['/v1beta/models/*'], gemini: true, outputTokens: { reserve: 256, failureCharge: 16, workspaceMax: 100_000, taskMax: 20_000 } })
    : modelPolicy({ ...common, comment: "corral dev's codex policy: the fake model's OpenAI APIs, and nothing else.", paths: ['/v1/responses', '/v1/chat/completions'], requests: { workspaceMax: 2_000 }, socket: { paths: ['/v1/responses'], workspaceMax: 100_000 } })
}

/** Create-or-update of the demo's providers, credentials and roles by name, noting each change. */
function seeder(client: CorralClient, changes: string[]) {
  const roles = rolesApi(client)
  return {
    async provider(name: string, kind: ProviderKind, baseUrl: string, description: string) {
      let provider = (await roles.listProviders({ includeArchived: true })).find((p) => p.name === name)
      if (!provider) {
        changes.push(`provider ${name} created`)
        return roles.createProvider({ name, kind, base_url: baseUrl, default_model: DEMO.model, description })
      }
      if (provider.archived_at) {
        await roles.unarchiveProvider(provider.id)
        changes.push(`provider ${name} unarchived`)
      }
      if (provider.base_url !== baseUrl) {
        provider = await roles.updateProvider(provider.id, { base_url: baseUrl })
        changes.push(`provider ${name} now at ${baseUrl}`)
      }
      return provider
    },
    async credential(name: string, provider: string) {
      const { credentials } = await client.request<{ credentials: Array<{ id: string; name: string }> }>('GET', '/credentials')
      if (credentials.some((c) => c.name === name)) return
      await client.request('POST', '/credentials', { body: { name, provider, kind: 'static_token', token: DEMO.apiKey } })
      changes.push(`credential ${name} created`)
    },
    async role(name: string, providerId: string, caps: string, description: string, agentKind?: CliAgentKind): Promise<string> {
      const existing = (await roles.listRoles({ includeArchived: true })).find((r) => r.name === name)
      if (!existing) {
        changes.push(`role ${name} created`)
        return (await roles.createRole({ name, provider_id: providerId, capabilities: caps, description, ...(agentKind ? { agent_kind: agentKind } : {}) })).id
      }
      if (existing.archived_at) {
        await roles.unarchiveRole(existing.id)
        changes.push(`role ${name} unarchived`)
      }
      if (existing.capabilities !== caps || existing.provider_id !== providerId || (agentKind && existing.agent_kind !== agentKind)) {
        await roles.updateRole(existing.id, { capabilities: caps, provider_id: providerId, ...(agentKind ? { agent_kind: agentKind } : {}) })
        changes.push(`role ${name} policy updated`)
      }
      return existing.id
    },
  }
}

/** True when the error says the admin key is not accepted (a data dir whose store was reset, a revoked key). */
export function isUnauthorized(err: unknown): boolean {
  return err instanceof ApiError && err.status === 401
}
