// Phase request_body: runs only when the admission needs the body (a body-matching rule, a
// schema, a format, or a transform that reads or writes the body). The body is buffered up to
// `maxInspectBytes`; beyond that the request is refused (413, reason schema_violation with
// detail.body_too_large, see docs/proxy.md). Bodies nobody needs are never buffered: they stream
// upstream in the forward phase.
import type { IncomingMessage } from 'node:http'
import type { BodyResult, CompiledCounter } from '../../policy/index.js'
import { Reservation } from '../budgets.js'
import { deny, type PhaseOutcome, type PolicyDenial } from '../decision.js'
import { andThen } from '../maybe.js'
import type { PhaseResult } from '../phase.js'
import { ResponseMeter } from '../metering.js'
import type { ProxyCore, RequestState } from '../request-state.js'

/** Undefined at once when nobody needs the body; else the body is read, then checked. */
export function requestBody(core: ProxyCore, st: RequestState): PhaseResult {
  const admission = st.admission!
  if (admission.decision === 'allow' && !admission.needsBody) return undefined
  return readBody(st.req, core.maxInspectBytes).then((read) => checkBody(core, st, read))
}

/** Checks a read body against the admission (exported for upgrades, whose body is empty: transports/websocket/upgrade.ts). */
export function checkBody(core: ProxyCore, st: RequestState, read: Buffer | 'too_large'): PhaseOutcome {
  const admission = st.admission!
  const { ctx } = st
  if (read === 'too_large') {
    const m = admission.decision === 'allow' ? admission.match : admission.candidates[0]!
    return deny(
      'schema_violation',
      {
        body_too_large: true,
        limit_bytes: core.maxInspectBytes,
        allowrule_eval: [{ capability: m.capability, rule: m.ruleKey, failed: 'schema', message: `body larger than ${core.maxInspectBytes} bytes cannot be inspected` }],
      },
      413,
    )
  }
  // The workspace may have been stopped while the body was arriving.
  if (!st.workspace!.active) return deny('workspace_gone')
  st.body = read
  st.requestBytes = read.length

  const policy = st.workspace!.policy.kind === 'ok' ? st.workspace!.policy.policy : undefined
  if (!policy) return deny('no_policy')
  let result: BodyResult
  try {
    result = policy.checkBody(admission, { request: st.policyRequest!, context: st.policyContext!, body: read.length ? read : undefined })
  } catch (err) {
    return deny('policy_error', { message: err instanceof Error ? err.message.slice(0, 200) : 'evaluation failed' })
  }
  if (result === undefined || result === null) return deny('policy_empty')
  if (typeof result !== 'object' || (result.decision !== 'allow' && result.decision !== 'deny')) return deny('policy_type_error')
  ctx.validationsApplied += result.validationsApplied ?? 0
  if (result.decision === 'deny') {
    if (result.detail.allowrule_eval) ctx.allowruleEval = result.detail.allowrule_eval
    if (result.detail.capability) ctx.capability = result.detail.capability
    const detail: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(result.detail)) if (v !== undefined) detail[k] = v
    return deny(result.reason, detail)
  }
  if (!result.match) return deny('policy_type_error')
  ctx.match = result.match
  ctx.capability = result.match.capability
  st.admission = { decision: 'allow', match: result.match, needsBody: true }
  if (result.json !== undefined) st.json = result.json
  return undefined
}

/**
 * Budget reservations (still the request_body phase): request amounts plus reserve_per_request
 * for every counter of the matched capability, and max_concurrent. Also arms response metering.
 */
export function reserveBudgets(core: ProxyCore, st: RequestState): PhaseResult {
  const ws = st.workspace!
  if (!core.budgets || ws.policy.kind !== 'ok' || st.admission?.decision !== 'allow') return undefined
  const counters = ws.policy.policy.counters(st.admission.match.capability)
  if (counters.length === 0) return undefined
  const declared = Number(st.req.headers['content-length'])
  const bytes = st.body ? st.body.length : Number.isFinite(declared) ? declared : 0
  // Without a promise while the leases cover the request (budgets.ts), the usual case.
  return andThen(core.budgets.reserve(ws.record.org_id, ws.record.id, st.ctx.attribution.task_id, counters, bytes, st.mcp?.tools), (r) => hold(core, st, counters, r))
}

function hold(core: ProxyCore, st: RequestState, counters: readonly CompiledCounter[], r: Reservation | PolicyDenial): PhaseOutcome {
  if (!(r instanceof Reservation)) return r
  st.reservation = r
  st.meter = new ResponseMeter(counters, core.maxInspectBytes)
  return undefined
}

/** Reads a request body into memory, stopping (and draining nothing more) past `limit` bytes. */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer | 'too_large'> {
  const declared = Number(req.headers['content-length'])
  if (Number.isFinite(declared) && declared > limit) return Promise.resolve('too_large')
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const onData = (chunk: Buffer): void => {
      size += chunk.length
      if (size > limit) {
        cleanup()
        resolve('too_large')
        return
      }
      chunks.push(chunk)
    }
    const onEnd = (): void => {
      cleanup()
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size))
    }
    const onError = (err: Error): void => {
      cleanup()
      reject(err)
    }
    const onClose = (): void => {
      if (!req.complete) {
        cleanup()
        reject(new Error('client closed the connection before the body ended'))
      }
    }
    function cleanup(): void {
      req.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose)
    }
    req.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose)
  })
}
