// The part of oidc-provider's API the test helper uses (the package ships no types; @types lags).
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http'
  interface Grant {
    addOIDCScope(scope: string): void
    save(): Promise<string>
    destroy(): Promise<void>
  }
  interface InteractionDetails {
    uid: string
    grantId?: string
    params: Record<string, unknown>
    prompt: { name: string; details: Record<string, unknown> }
    session?: { accountId: string }
  }
  interface AccessToken { grantId?: string; isExpired: boolean }
  interface ClientInfo { grantTypeAllowed(type: string): boolean }
  interface GrantContext { oidc?: { params?: Record<string, unknown> } }
  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>)
    callback(): (req: IncomingMessage, res: ServerResponse) => Promise<void>
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<InteractionDetails>
    interactionFinished(req: IncomingMessage, res: ServerResponse, result: Record<string, unknown>, opts?: { mergeWithLastSubmission?: boolean }): Promise<void>
    on(event: string, listener: (ctx: GrantContext, ...rest: unknown[]) => void): this
    Grant: { new (init: { accountId: string; clientId: string }): Grant; find(id: string): Promise<Grant | undefined> }
    AccessToken: { find(token: string): Promise<AccessToken | undefined> }
  }
  export type { ClientInfo }
}
