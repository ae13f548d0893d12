// The one contract of a proxy phase (after Envoy's filter chain): a phase is a
// function of the process-wide core and the request's state that returns continue (undefined) or
// a denial (the local reply), and a promise of that only when it must wait. A phase never throws a
// denial and never calls the next phase; a throw is a fault of the proxy. The runner (runner.ts)
// owns the order, sets the row's `phase` before each step, stops at the first denial, and always
// ends in the terminal phase. docs/design.md "How to add a phase".
import type { Phase } from '../contract/index.js'
import type { PhaseOutcome } from './decision.js'
import type { MaybePromise } from './maybe.js'
import type { ProxyCore, RequestState } from './request-state.js'

/** What every phase returns. */
export type PhaseResult = MaybePromise<PhaseOutcome>

/** Every phase has this signature. */
export type ProxyPhase = (core: ProxyCore, st: RequestState) => PhaseResult

/** One step of a chain: the row's `phase` while it runs, a name for docs and faults, the function. */
export interface PhaseStep {
  readonly phase: Phase
  readonly name: string
  readonly run: ProxyPhase
}

/**
 * Runs a chain of phases in order, setting the row's `phase` before each; stops at the first
 * denial. A throw (or a rejection) is a fault, the runner's to answer.
 */
export function runPhases(core: ProxyCore, st: RequestState, steps: readonly PhaseStep[], from = 0): PhaseResult {
  // untilDenied's loop written out: no closure over core and st per chain (maybe.ts).
  for (let i = from; i < steps.length; i++) {
    const step = steps[i]!
    st.ctx.phase = step.phase
    const out = step.run(core, st)
    if (out instanceof Promise) return runPhasesAfter(out, core, st, steps, i + 1)
    if (out) return out
  }
  return undefined
}

function runPhasesAfter(out: Promise<PhaseOutcome>, core: ProxyCore, st: RequestState, steps: readonly PhaseStep[], next: number): Promise<PhaseOutcome> {
  return out.then((d) => d ?? runPhases(core, st, steps, next))
}
