// What `corral dev` puts in the default org, through the public /v1 API with the admin key, so the
// demo works the way any user's setup would. Idempotent: each start brings the same names to the
// same state (the fake model's port may differ between starts, so the provider's URL and the
// role's policy are updated in place); nothing is deleted.
import { ApiError, rolesApi, type CorralClient } from '../client/index.js'

export const DEMO = {
  provider: 'demo-model',
  model: 'demo-1',
  secret: 'demo-model-key',
  credential: 'demo-model',
  role: 'demo',
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
}

/** The caps.yaml text of a model-only policy. */
export function modelPolicy(o: ModelPolicyOptions): string {
  const lines = [
    ...(o.comment ? [`# ${o.comment}`] : []),
    '- name: model', '  type: http', '  allow:', '    - name: messages', `      domains: ["${o.domain}"]`,
    ...(o.allowPrivate ? [`      allow_private: [${o.allowPrivate.map((r) => `"${r}"`).join(', ')}]`] : []),
    '      methods: [POST]', '      paths: [/v1/messages]',
  ]
  const transforms = [
    ...(o.credential ? ['    - name: api-key', `      auth: {credential: ${o.credential.name}, provider: ${o.credential.provider}}`] : []),
    ...(o.identity ? ['    - name: identity', `      header: {name: Accept-Encoding, action: set, value: '"identity"'}`] : []),
  ]
  if (transforms.length) lines.push('  transforms:', ...transforms)
  const t = o.outputTokens
  if (t) {
    lines.push(
      '  budgets:', '    counters:', '      - name: output_tokens', '        source: response', '        requires_body: true', '        framing: sse',
      '        format: application/json', '        encoding: identity', '        status_codes: ["2xx"]', '        sse_event: message_delta',
      '        accumulator: max', '        value: int(event.data.usage.output_tokens)', '        terminal_event_type: message_stop',
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
  const roles = rolesApi(client)
  const changes: string[] = []
  const caps = demoCaps(Number(new URL(modelUrl).port))

  const providers = await roles.listProviders({ includeArchived: true })
  let provider = providers.find((p) => p.name === DEMO.provider)
  if (!provider) {
    provider = await roles.createProvider({ name: DEMO.provider, kind: 'anthropic', base_url: modelUrl, default_model: DEMO.model, description: 'corral dev: the scripted fake model on loopback' })
    changes.push(`provider ${DEMO.provider} created`)
  } else {
    if (provider.archived_at) {
      await roles.unarchiveProvider(provider.id)
      changes.push(`provider ${DEMO.provider} unarchived`)
    }
    if (provider.base_url !== modelUrl) {
      provider = await roles.updateProvider(provider.id, { base_url: modelUrl })
      changes.push(`provider ${DEMO.provider} now at ${modelUrl}`)
    }
  }

  // Secrets are create-or-replace; the credential is created once and kept.
  await client.request('POST', '/secrets', { body: { name: DEMO.secret, value: DEMO.apiKey } })
  const { credentials } = await client.request<{ credentials: Array<{ id: string; name: string }> }>('GET', '/credentials')
  if (!credentials.some((c) => c.name === DEMO.credential)) {
    await client.request('POST', '/credentials', { body: { name: DEMO.credential, provider: 'anthropic', kind: 'static_token', token: DEMO.apiKey } })
    changes.push(`credential ${DEMO.credential} created`)
  }

  const existing = (await roles.listRoles({ includeArchived: true })).find((r) => r.name === DEMO.role)
  let roleId: string
  if (!existing) {
    roleId = (await roles.createRole({ name: DEMO.role, provider_id: provider.id, capabilities: caps, description: 'corral dev: the demo agent role' })).id
    changes.push(`role ${DEMO.role} created`)
  } else {
    roleId = existing.id
    if (existing.archived_at) {
      await roles.unarchiveRole(existing.id)
      changes.push(`role ${DEMO.role} unarchived`)
    }
    if (existing.capabilities !== caps || existing.provider_id !== provider.id) {
      await roles.updateRole(existing.id, { capabilities: caps, provider_id: provider.id })
      changes.push(`role ${DEMO.role} policy updated`)
    }
  }
  return { provider_id: provider.id, role_id: roleId, changes }
}

/** True when the error says the admin key is not accepted (a data dir whose store was reset, a revoked key). */
export function isUnauthorized(err: unknown): boolean {
  return err instanceof ApiError && err.status === 401
}
