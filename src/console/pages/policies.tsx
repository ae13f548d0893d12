// Policies: a role's caps.yaml in CodeMirror, linted as you type by the server's compiler
// (POST /v1/caps/lint: the diagnostics of `corral caps lint`, at line:column), saved with
// PATCH /v1/agent-roles/{id} (caps:write), and `caps test` cases run against the text being edited
// (POST /v1/caps/test).
import { useEffect, useRef, useState, type ReactNode } from 'react'
import { seg } from '../api.js'
import { YamlEditor, type LineDiagnostic } from '../editor.js'
import { navigate, type Route } from '../router.js'
import { useSession } from '../session.js'
import { ErrorBox, Status, useAction, useLoad } from '../ui.js'
import type { AgentRoleRecord } from '../wire.js'

interface CasesReport {
  passed: number
  failed: number
  cases: { name: string; passed: boolean; failures: { field: string; expected?: unknown; actual?: unknown }[] }[]
}

export function PoliciesPage(props: { route: Route }): ReactNode {
  const { api } = useSession()
  const roles = useLoad((signal) => api.get<{ agent_roles: AgentRoleRecord[] }>('/agent-roles', {}, signal), [])
  const roleId = props.route.params.get('role') ?? roles.data?.agent_roles[0]?.id ?? ''
  const role = roles.data?.agent_roles.find((r) => r.id === roleId)
  return (
    <section aria-labelledby="policies-title">
      <h1 id="policies-title">Policies</h1>
      <label>
        Role{' '}
        <select value={roleId} onChange={(e) => navigate(['policies'], { role: e.target.value })}>
          {(roles.data?.agent_roles ?? []).map((r) => (
            <option key={r.id} value={r.id}>
              {r.name}
            </option>
          ))}
        </select>
      </label>
      <Status loaded={roles} />
      {roles.data?.agent_roles.length === 0 && <p>No roles yet.</p>}
      {role && <PolicyEditor key={role.id} role={role} onSaved={roles.reload} />}
    </section>
  )
}

// long-function: the editor, its live diagnostics, save and the cases runner share one text
function PolicyEditor(props: { role: AgentRoleRecord; onSaved: () => void }): ReactNode {
  const { api, can } = useSession()
  const [text, setText] = useState(props.role.capabilities ?? '')
  const [diagnostics, setDiagnostics] = useState<readonly LineDiagnostic[]>([])
  const [checked, setChecked] = useState(false)
  const [cases, setCases] = useState('')
  const [report, setReport] = useState<CasesReport>()
  const save = useAction()
  const test = useAction()
  const latest = useRef(0)
  const lint = async (source: string) => {
    const n = ++latest.current
    const res = await api.call<{ valid: boolean; diagnostics: LineDiagnostic[] }>('POST', '/caps/lint', { body: { capabilities: source } })
    if (n === latest.current) {
      setDiagnostics(res.diagnostics)
      setChecked(true)
    }
    return res.diagnostics
  }
  useEffect(() => void lint(text).catch(() => {}), [])
  const errors = diagnostics.filter((d) => d.severity === 'error').length
  const dirty = text !== (props.role.capabilities ?? '')
  return (
    <div>
      <YamlEditor label={`caps.yaml of role ${props.role.name}`} value={text} onChange={setText} lint={lint} readOnly={!can('caps:write')} />
      <div className="actions">
        <span role="status" data-testid="lint-status">
          {!checked ? 'checking…' : errors === 0 ? `valid${diagnostics.length ? ` (${diagnostics.length} warning${diagnostics.length === 1 ? '' : 's'})` : ''}` : `${errors} error${errors === 1 ? '' : 's'}`}
        </span>
        {can('caps:write') && (
          <button
            type="button"
            className="primary"
            disabled={!dirty || errors > 0 || save.busy}
            onClick={() => void save.run(() => api.patch(`/agent-roles/${seg(props.role.id)}`, { capabilities: text })).then((ok) => ok && props.onSaved())}
          >
            Save policy
          </button>
        )}
      </div>
      <ErrorBox error={save.error} />
      <ul className="diagnostics" aria-label="Diagnostics">
        {diagnostics.map((d, i) => (
          <li key={i} className={d.severity === 'error' ? 'error' : 'muted'}>
            <span className="mono">
              {d.line}:{d.column}
            </span>{' '}
            {d.severity} <code>{d.code}</code> {d.message}
          </li>
        ))}
      </ul>
      <h2>Test cases</h2>
      <p className="hint">A `caps test` cases file (docs/policy.md), run against the text above — saved or not.</p>
      <YamlEditor label="caps test cases" value={cases} onChange={setCases} />
      <div className="actions">
        <button type="button" disabled={test.busy || cases.trim() === ''} onClick={() => void test.run(async () => setReport(await api.post<CasesReport>('/caps/test', { capabilities: text, cases })))}>
          Run cases
        </button>
        {report && (
          <span role="status" data-testid="cases-status">
            {report.passed} passed, {report.failed} failed
          </span>
        )}
      </div>
      <ErrorBox error={test.error} />
      {report && (
        <ul aria-label="Case results">
          {report.cases.map((c, i) => (
            <li key={i} className={c.passed ? 'allow' : 'deny'}>
              {c.passed ? 'pass' : 'FAIL'} {c.name}
              {c.failures.map((f, j) => (
                <div key={j} className="mono">
                  {f.field}: expected {JSON.stringify(f.expected)}, got {JSON.stringify(f.actual)}
                </div>
              ))}
            </li>
          ))}
        </ul>
      )}
    </div>
  )
}
