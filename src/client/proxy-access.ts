// The proxy's CA and capability tokens, from the API of the server one is logged in to.
import type { CorralClient } from './client.js'

export interface ProxyCa { pem: string; fingerprint_sha256: string }
export interface MintedProxyToken { token: string; workspace_id: string; org_id: string; task_id?: string; expires_at: string }

export function proxyAccessApi(client: CorralClient) {
  return {
    ca: () => client.request<ProxyCa>('GET', '/proxy/ca'),
    mintToken: (workspaceId: string, body: { task_id?: string; ttl_seconds?: number }) =>
      client.request<MintedProxyToken>('POST', `/workspaces/${encodeURIComponent(workspaceId)}/proxy-token`, { body }),
  }
}
