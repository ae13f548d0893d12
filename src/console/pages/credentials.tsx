// Credentials: the org's and the caller's personal ones with their status (GET /v1/credentials),
// create (POST /v1/credentials: the secret goes out once and the form forgets it), OAuth consent
// (POST /v1/credentials/{id}/oauth/start → the provider's page in a new tab → the status is polled
// until the callback made it active) and delete. auth:write reaches every credential of the org;
// auth:write:own only the caller's personal ones (the API narrows; the page shows what it allows).
import { useEffect, useState, type ReactNode } from 'react'
import { ApiFailure, seg } from '../api.js'
import { ResourceList } from '../resource.js'
import { useSession, type Session } from '../session.js'
import { describeError, when } from '../ui.js'
import { CredentialCreate } from './credential-create.js'

export interface Credential {
  id: string
  name: string
  provider: string
  kind: string
  status: string
  owner_user_id?: string
  scopes?: string[]
  created_at: string
  updated_at: string
}

const POLL_MS = 1000

/** Whether the caller may act on this credential: auth:write on any, auth:write:own on their personal ones. */
function reaches(session: Session, c: Credential): boolean {
  return session.holds('auth:write') || (session.can('auth:write') && c.owner_user_id === session.me.user_id)
}

export function CredentialsPage(): ReactNode {
  const session = useSession()
  const { api, can } = session
  const [version, setVersion] = useState(0)
  const bump = () => setVersion((v) => v + 1)
  return (
    <ResourceList<Credential>
      title="Credentials"
      note={<p className="hint">Material is write-only: a token, password or client secret is sent once when the credential is created and never shown again. The status says whether the proxy can mint with it.</p>}
      deps={[version]}
      load={async (signal) => (await api.get<{ credentials: Credential[] }>('/credentials', {}, signal)).credentials}
      rowKey={(c) => c.id}
      columns={[
        { label: 'Name', render: (c) => <code>{c.name}</code> },
        { label: 'Provider', render: (c) => c.provider },
        { label: 'Kind', render: (c) => c.kind },
        { label: 'Owner', render: (c) => (c.owner_user_id ? (c.owner_user_id === session.me.user_id ? 'you (personal)' : c.owner_user_id) : 'org') },
        { label: 'Status', render: (c) => <span className={`state state-${c.status}`} data-testid={`status-${c.name}`}>{c.status}</span> },
        { label: 'Scopes', render: (c) => (c.scopes ?? []).join(' ') },
        { label: 'Created', render: (c) => when(c.created_at) },
        { label: 'Consent', render: (c) => (c.kind === 'oauth' && reaches(session, c) ? <Authorize credential={c} onChange={bump} /> : '') },
      ]}
      actions={can('auth:write') ? [{ label: () => 'Delete', danger: true, when: (c) => reaches(session, c), run: (c) => api.del(`/credentials/${seg(c.id)}`) }] : []}
      createSlot={can('auth:write') ? <CredentialCreate onCreated={bump} /> : undefined}
    />
  )
}

type Phase = { at: 'idle' } | { at: 'waiting'; url: string; until: number } | { at: 'done' } | { at: 'expired' }

/**
 * OAuth consent from the page: start it, open the provider's authorize page in a new tab (also
 * offered as a link, for a browser that blocks the tab), then read the credential every second
 * until a consent completed (status active, record updated) or the state expired (10 minutes).
 */
function Authorize(props: { credential: Credential; onChange: () => void }): ReactNode {
  const { api } = useSession()
  const [phase, setPhase] = useState<Phase>({ at: 'idle' })
  const [error, setError] = useState<unknown>()
  const c = props.credential
  const start = async () => {
    setError(undefined)
    try {
      const started = await api.post<{ auth_url: string; expires_at?: string }>(`/credentials/${seg(c.id)}/oauth/start`)
      const url = new URL(started.auth_url)
      // Only a web page is opened or linked (never a javascript: or data: URL).
      if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('the authorization URL is not a web address')
      window.open(url.href, '_blank', 'noopener,noreferrer')
      const until = started.expires_at ? Date.parse(started.expires_at) : Date.now() + 600_000
      setPhase({ at: 'waiting', url: url.href, until })
    } catch (err) {
      setError(err)
    }
  }
  useEffect(() => {
    if (phase.at !== 'waiting') return
    const ctl = new AbortController()
    const tick = async () => {
      try {
        const now = await api.get<Credential>(`/credentials/${seg(c.id)}`, {}, ctl.signal)
        if (now.status === 'active' && now.updated_at !== c.updated_at) return setPhase({ at: 'done' }), props.onChange()
      } catch (err) {
        if (ctl.signal.aborted) return
        if (err instanceof ApiFailure && err.status < 500) return setError(err), setPhase({ at: 'idle' })
      }
      if (Date.now() > phase.until) return setPhase({ at: 'expired' })
      timer = setTimeout(() => void tick(), POLL_MS)
    }
    let timer = setTimeout(() => void tick(), POLL_MS)
    return () => (ctl.abort(), clearTimeout(timer))
  }, [phase])
  return (
    <span>
      {phase.at !== 'waiting' && (
        <button type="button" onClick={() => void start()}>
          {c.status === 'active' ? 'Re-authorize' : 'Authorize'} {c.name}
        </button>
      )}
      {phase.at === 'waiting' && (
        <span role="status">
          Waiting for consent…{' '}
          <a href={phase.url} target="_blank" rel="noopener noreferrer">
            open the provider's page
          </a>{' '}
          <button type="button" onClick={() => setPhase({ at: 'idle' })}>
            Stop waiting
          </button>
        </span>
      )}
      {phase.at === 'done' && <span role="status"> consent recorded</span>}
      {phase.at === 'expired' && <span role="status"> the consent was not completed in time; start again</span>}
      {error !== undefined && (
        <span role="alert" className="error">
          {' '}
          {describeError(error)}
        </span>
      )}
    </span>
  )
}
