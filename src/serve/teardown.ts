// What serve has started, stopped in reverse on shutdown or when a later part fails to start.

import type { Logger } from 'pino'

interface Step {
  readonly name: string
  readonly stop: () => Promise<void>
  /** A failure here fails the shutdown (exit 1): the audit log and the store, whose loss would be silent. */
  readonly mustSucceed: boolean
}

export class Teardown {
  readonly #steps: Step[] = []
  readonly #logger: Logger
  #running: Promise<void> | undefined

  constructor(logger: Logger) {
    this.#logger = logger
  }

  /** Registers what stops a part that has just started. */
  add(name: string, stop: () => Promise<void>, opts: { mustSucceed?: boolean } = {}): void {
    this.#steps.push({ name, stop, mustSucceed: opts.mustSucceed === true })
  }

  /** Stops every part in reverse; once only (a second call waits for the first). */
  run(): Promise<void> {
    this.#running ??= this.#runOnce()
    return this.#running
  }

  async #runOnce(): Promise<void> {
    let failure: unknown
    let current = ''
    // A step that waits on something nothing can settle any more (no timer, socket or thread left)
    // would let the event loop run dry and Node exit 13 without a word: name the step instead.
    const stalled = () => {
      this.#logger.error({ service: current }, `shutdown stalled in ${current}: it waits on nothing that can still happen`)
      process.exitCode = 1
    }
    process.once('beforeExit', stalled)
    try {
      for (const step of [...this.#steps].reverse()) {
        current = step.name
        try {
          await step.stop()
        } catch (err) {
          if (step.mustSucceed) failure ??= err
          else this.#logger.error({ err, service: step.name }, 'service did not stop cleanly')
        }
      }
    } finally {
      process.off('beforeExit', stalled)
    }
    if (failure !== undefined) throw failure
  }
}
