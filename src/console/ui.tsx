// Small shared pieces: loading a resource, showing an API error, tables, time.
import { useCallback, useEffect, useState, type ReactNode } from 'react'
import { ApiFailure } from './api.js'

export interface Loaded<T> {
  readonly data?: T
  readonly error?: unknown
  readonly loading: boolean
  reload(): void
}

/** Runs `load` on mount and whenever `deps` change; `reload()` runs it again. */
export function useLoad<T>(load: (signal: AbortSignal) => Promise<T>, deps: readonly unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean }>({ loading: true })
  const [tick, setTick] = useState(0)
  useEffect(() => {
    const ctl = new AbortController()
    setState((s) => ({ ...s, loading: true }))
    load(ctl.signal).then(
      (data) => !ctl.signal.aborted && setState({ data, loading: false }),
      (error: unknown) => !ctl.signal.aborted && setState({ error, loading: false }),
    )
    return () => ctl.abort()
    // eslint-style exhaustive deps are the caller's: `deps` names what the load reads
  }, [...deps, tick])
  const reload = useCallback(() => setTick((t) => t + 1), [])
  return { ...state, reload }
}

export function describeError(error: unknown): string {
  if (error instanceof ApiFailure) return `${error.message} (${error.code}${error.envelope.request_id ? `, ${error.envelope.request_id}` : ''})`
  return error instanceof Error ? error.message : String(error)
}

export function ErrorBox(props: { error: unknown }): ReactNode {
  if (props.error === undefined) return null
  return (
    <p role="alert" className="error">
      {describeError(props.error)}
    </p>
  )
}

export function Status(props: { loaded: Pick<Loaded<unknown>, 'loading' | 'error'> }): ReactNode {
  if (props.loaded.error !== undefined) return <ErrorBox error={props.loaded.error} />
  if (props.loaded.loading) return <p aria-live="polite">Loading…</p>
  return null
}

export function when(iso: string | undefined): string {
  if (!iso) return ''
  const d = new Date(iso)
  return Number.isNaN(d.getTime()) ? iso : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z')
}

/** Runs an action, reporting its failure through `onError`; returns whether it succeeded. */
export function useAction(): { busy: boolean; error?: unknown; run(action: () => Promise<unknown>): Promise<boolean> } {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>()
  const run = async (action: () => Promise<unknown>) => {
    setBusy(true)
    setError(undefined)
    try {
      await action()
      return true
    } catch (err) {
      setError(err)
      return false
    } finally {
      setBusy(false)
    }
  }
  return { busy, error, run }
}
