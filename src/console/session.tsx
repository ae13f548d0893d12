// Who is signed in. The token (an API key or a session token) is kept in this tab's sessionStorage
// only: closing the tab signs out, other tabs and origins never see it, and it is sent only as
// `Authorization: Bearer` by api.ts. `GET /v1/me` checks it and says what the caller may do; the
// console hides what the caller may not do, and the API refuses it anyway.
import { createContext, useContext, useState, type FormEvent, type ReactNode } from 'react'
import type { Me } from './wire.js'
import { Api, ApiFailure } from './api.js'

const STORAGE_KEY = 'corral.token'

export interface Session {
  readonly api: Api
  readonly me: Me
  /** True when the caller holds `permission` or its `:own` variant. */
  can(permission: string): boolean
  /** True when the caller holds `permission` itself (routes that have no `:own` variant). */
  holds(permission: string): boolean
  signOut(): void
}

const SessionContext = createContext<Session | null>(null)

export function useSession(): Session {
  const session = useContext(SessionContext)
  if (!session) throw new Error('useSession outside a signed-in console')
  return session
}

function sessionOf(api: Api, me: Me, signOut: () => void): Session {
  const held = new Set(me.permissions)
  return { api, me, signOut, can: (p) => held.has(p) || held.has(`${p}:own`), holds: (p) => held.has(p) }
}

async function check(token: string): Promise<Me> {
  return new Api(token).get<Me>('/me')
}

export function SessionGate(props: { children: ReactNode; restored?: { token: string; me: Me } }): ReactNode {
  const [current, setCurrent] = useState<{ token: string; me: Me } | undefined>(props.restored)
  const signOut = () => {
    sessionStorage.removeItem(STORAGE_KEY)
    setCurrent(undefined)
  }
  if (!current) return <SignIn onSignedIn={(token, me) => (sessionStorage.setItem(STORAGE_KEY, token), setCurrent({ token, me }))} />
  return <SessionContext.Provider value={sessionOf(new Api(current.token), current.me, signOut)}>{props.children}</SessionContext.Provider>
}

/** A token saved by an earlier sign-in in this tab, if it still works. */
export async function restore(): Promise<{ token: string; me: Me } | undefined> {
  const token = sessionStorage.getItem(STORAGE_KEY)
  if (!token) return undefined
  try {
    return { token, me: await check(token) }
  } catch {
    sessionStorage.removeItem(STORAGE_KEY)
    return undefined
  }
}

function SignIn(props: { onSignedIn: (token: string, me: Me) => void }): ReactNode {
  const [token, setToken] = useState('')
  const [error, setError] = useState<string>()
  const [busy, setBusy] = useState(false)
  const submit = async (e: FormEvent) => {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      props.onSignedIn(token.trim(), await check(token.trim()))
    } catch (err) {
      setError(err instanceof ApiFailure ? `${err.message} (${err.code})` : 'cannot reach the corral API')
    } finally {
      setBusy(false)
    }
  }
  return (
    <main className="signin">
      <h1>corral console</h1>
      <form onSubmit={submit} aria-label="Sign in">
        <label htmlFor="token">API key or session token</label>
        <input id="token" name="token" type="password" autoComplete="off" required value={token} onChange={(e) => setToken(e.target.value)} />
        <button type="submit" disabled={busy || token.trim() === ''}>
          Sign in
        </button>
        {error && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
      </form>
      <p className="hint">The token stays in this browser tab only and is sent as a Bearer header to this server's /v1 API.</p>
    </main>
  )
}
