// The decision rows of a batch's messages after the first: one row per JSON-RPC message, the
// request's own row being the first message's (terminal.ts writes it). These are written, durable,
// before the batch is forwarded or its refusal answered, like the request's own row.
import type { DenyReason } from '../../contract/index.js'
import { deny, type DecisionContext, type PolicyDenial } from '../decision.js'
import { decisionRow } from './terminal.js'
import type { ProxyCore } from '../request-state.js'

export async function emitBatchRows(core: ProxyCore, ctx: DecisionContext, rows: { fields: Record<string, unknown>; reason?: DenyReason }[]): Promise<PolicyDenial | undefined> {
  const base = decisionRow(ctx)
  try {
    await Promise.all(
      rows.map(({ fields, reason }) => {
        const row = { ...base, detail: fields }
        if (reason) {
          row.decision = 'deny'
          row.reason = reason
          delete row.debits
          delete row.budget_state
          delete row.floored
        }
        return core.audit.emit(row)
      }),
    )
    return undefined
  } catch (err) {
    core.counters.auditFailures++
    return deny('audit_unavailable', { retry_after_s: core.auditGate.refused(err) ?? 1 }, 503)
  }
}
