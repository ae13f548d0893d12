// The create form of a credential (POST /v1/credentials): the fields depend on the kind (a token;
// a username and password; an OAuth client with its endpoints and scopes). The provider and kind
// choices are the API's own, read from its OpenAPI description. The secret is sent once: after
// the answer the form forgets every value, and nothing shows it again.
import { useState, type FormEvent, type ReactNode } from 'react'
import { useSession } from '../session.js'
import { ErrorBox, useAction, useLoad } from '../ui.js'

interface Choices {
  providers: string[]
  kinds: string[]
}

const FALLBACK_KINDS = ['static_token', 'basic_auth', 'query_key', 'oauth']

/** The `provider` and `kind` enums of `POST /v1/credentials` in /v1/openapi.json (empty when absent). */
async function choices(signal: AbortSignal): Promise<Choices> {
  const res = await fetch('/v1/openapi.json', { signal, headers: { accept: 'application/json' } })
  if (!res.ok) return { providers: [], kinds: FALLBACK_KINDS }
  const doc = (await res.json()) as { paths?: Record<string, Record<string, { requestBody?: { content?: Record<string, { schema?: { properties?: Record<string, { enum?: string[] }> } }> } }>> }
  const props = doc.paths?.['/v1/credentials']?.post?.requestBody?.content?.['application/json']?.schema?.properties ?? {}
  return { providers: props.provider?.enum ?? [], kinds: props.kind?.enum ?? FALLBACK_KINDS }
}

/** The request body for the values of the form (only the fields of the chosen kind). */
export function credentialBody(v: Record<string, string>, personal: boolean): Record<string, unknown> {
  const body: Record<string, unknown> = { name: v.name?.trim(), provider: v.provider, kind: v.kind }
  if (v.kind === 'basic_auth') Object.assign(body, { username: v.username ?? '', password: v.password })
  else if (v.kind === 'oauth') {
    Object.assign(body, { client_id: v.client_id?.trim(), client_secret: v.client_secret, scopes: (v.scopes ?? '').split(/[\s,]+/).filter(Boolean) })
    if (v.endpoints === 'urls') Object.assign(body, { authorization_url: v.authorization_url?.trim(), token_url: v.token_url?.trim() })
    else body.issuer = v.issuer?.trim()
  } else body.token = v.token
  if (personal) body.personal = true
  return body
}

// long-function: one form whose fields follow the chosen kind reads best in one place
export function CredentialCreate(props: { onCreated: () => void }): ReactNode {
  const { api, me, holds } = useSession()
  const options = useLoad(choices, [])
  const [open, setOpen] = useState(false)
  const [values, setValues] = useState<Record<string, string>>({ kind: 'static_token', endpoints: 'issuer' })
  const [personalWanted, setPersonal] = useState(false)
  const [message, setMessage] = useState<ReactNode>()
  const action = useAction()
  // auth:write:own creates only personal credentials; an API key has no person, so none at all.
  const onlyPersonal = !holds('auth:write')
  const personal = onlyPersonal || personalWanted
  const set = (name: string) => (e: { target: { value: string } }) => setValues({ ...values, [name]: e.target.value })
  const field = (name: string, label: string, type = 'text', required = true) => (
    <div>
      <label htmlFor={`cred-${name}`}>{label}</label>
      <input id={`cred-${name}`} type={type} autoComplete="off" required={required} value={values[name] ?? ''} onChange={set(name)} />
    </div>
  )
  const submit = (e: FormEvent) => {
    e.preventDefault()
    void action.run(async () => {
      const created = await api.post<{ name: string; status: string; kind: string }>('/credentials', credentialBody(values, personal))
      // The secret is gone from the page from here on.
      setValues({ kind: 'static_token', endpoints: 'issuer' })
      setOpen(false)
      setMessage(
        <>
          Created <code>{created.name}</code> ({created.status}). Its secret was sent once and is not shown again.
          {created.kind === 'oauth' ? ' Authorize it below to complete the consent.' : ''}
        </>,
      )
      props.onCreated()
    })
  }
  const kind = values.kind ?? 'static_token'
  const providers = options.data?.providers ?? []
  return (
    <div>
      <button type="button" aria-expanded={open} onClick={() => (setOpen(!open), setMessage(undefined))}>
        Create credential
      </button>
      {message && (
        <div role="status" className="notice">
          {message}
        </div>
      )}
      {open && (
        <form onSubmit={submit} aria-label="Create credential" className="create">
          {field('name', 'Name')}
          <div>
            <label htmlFor="cred-kind">Kind</label>
            <select id="cred-kind" value={kind} onChange={set('kind')}>
              {(options.data?.kinds ?? FALLBACK_KINDS).map((k) => (
                <option key={k}>{k}</option>
              ))}
            </select>
          </div>
          {providers.length > 0 || options.loading ? (
            <div>
              <label htmlFor="cred-provider">Provider</label>
              {/* Disabled until the API's list arrives (a text field only if it has none). */}
              <select id="cred-provider" required disabled={options.loading} value={values.provider ?? ''} onChange={set('provider')}>
                <option value="">{options.loading ? 'loading…' : 'choose…'}</option>
                {providers.map((p) => (
                  <option key={p}>{p}</option>
                ))}
              </select>
            </div>
          ) : (
            field('provider', 'Provider')
          )}
          {(kind === 'static_token' || kind === 'query_key') && field('token', 'Token', 'password')}
          {kind === 'basic_auth' && (
            <>
              {field('username', 'Username', 'text', false)}
              {field('password', 'Password', 'password')}
            </>
          )}
          {kind === 'oauth' && (
            <>
              {field('client_id', 'Client id')}
              {field('client_secret', 'Client secret', 'password')}
              <div>
                <label htmlFor="cred-endpoints">Endpoints from</label>
                <select id="cred-endpoints" value={values.endpoints ?? 'issuer'} onChange={set('endpoints')}>
                  <option value="issuer">OpenID Connect issuer (discovery)</option>
                  <option value="urls">authorization and token URLs</option>
                </select>
              </div>
              {values.endpoints === 'urls' ? (
                <>
                  {field('authorization_url', 'Authorization URL (https)', 'url')}
                  {field('token_url', 'Token URL (https)', 'url')}
                </>
              ) : (
                field('issuer', 'Issuer (https)', 'url')
              )}
              {field('scopes', 'Scopes (space-separated)')}
            </>
          )}
          {me.kind === 'session' && (
            <label className="inline">
              <input type="checkbox" checked={personal} disabled={onlyPersonal} onChange={(e) => setPersonal(e.target.checked)} /> personal (mine only)
            </label>
          )}
          <button type="submit" className="primary" disabled={action.busy}>
            Create
          </button>
          <ErrorBox error={action.error} />
        </form>
      )}
    </div>
  )
}
