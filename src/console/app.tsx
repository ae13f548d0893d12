// The console's frame: the main navigation (a list of links, keyboard-reachable in order) and the
// page the hash route names. Each page lives in pages/ and reads the session for its API and rights.
import { lazy, Suspense, type ReactNode } from 'react'
import { KeysPage, MembersPage } from './pages/access.js'
import { AuditPage } from './pages/audit.js'
import { BudgetsPage } from './pages/budgets.js'
import { ProvidersPage, RolesPage } from './pages/config.js'
import { PacksPage } from './pages/packs.js'
import { CredentialsPage } from './pages/credentials.js'
import { SecretsPage } from './pages/material.js'
import { WorkspacePage } from './pages/workspace.js'
import { WorkspacesPage } from './pages/workspaces.js'
import { href, useRoute, type Route } from './router.js'
import { useSession } from './session.js'

// The two pages with heavy libraries (Recharts, CodeMirror) load on first visit, not with the app.
const StatsPage = lazy(() => import('./pages/stats.js').then((m) => ({ default: m.StatsPage })))
const PoliciesPage = lazy(() => import('./pages/policies.js').then((m) => ({ default: m.PoliciesPage })))

interface Section {
  readonly path: string
  readonly label: string
  readonly render: (route: Route) => ReactNode
}

// A workspace page is keyed by its id: moving from one workspace to another (a fork, a link) starts
// a fresh page, so no action can act on the record of the workspace shown before.
const SECTIONS: readonly Section[] = [
  { path: 'workspaces', label: 'Workspaces', render: (r) => (r.parts[1] ? <WorkspacePage key={r.parts[1]} id={r.parts[1]} /> : <WorkspacesPage route={r} />) },
  { path: 'audit', label: 'Audit', render: (r) => <AuditPage route={r} /> },
  { path: 'stats', label: 'Stats', render: () => <StatsPage /> },
  { path: 'budgets', label: 'Budgets', render: (r) => <BudgetsPage route={r} /> },
  { path: 'policies', label: 'Policies', render: (r) => <PoliciesPage route={r} /> },
  { path: 'keys', label: 'API keys', render: () => <KeysPage /> },
  { path: 'members', label: 'Members', render: () => <MembersPage /> },
  { path: 'providers', label: 'Providers', render: () => <ProvidersPage /> },
  { path: 'roles', label: 'Roles', render: () => <RolesPage /> },
  { path: 'packs', label: 'Packs', render: () => <PacksPage /> },
  { path: 'secrets', label: 'Secrets', render: () => <SecretsPage /> },
  { path: 'credentials', label: 'Credentials', render: () => <CredentialsPage /> },
]

export function App(): ReactNode {
  const route = useRoute()
  const { me, signOut } = useSession()
  const section = SECTIONS.find((s) => s.path === route.parts[0]) ?? SECTIONS[0]!
  return (
    <div className="frame">
      <header className="top">
        <a className="brand" href="#/workspaces">
          corral
        </a>
        <span className="who">
          {me.org.name} · {me.email ?? me.key_id ?? me.user_id}
          {me.permission_set ? ` (${me.permission_set})` : me.role ? ` (${me.role})` : ''}
        </span>
        <button type="button" onClick={signOut}>
          Sign out
        </button>
      </header>
      <nav aria-label="Main">
        <ul>
          {SECTIONS.map((s) => (
            <li key={s.path}>
              <a href={href([s.path])} aria-current={s === section ? 'page' : undefined}>
                {s.label}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <main id="main">
        <Suspense fallback={<p aria-live="polite">Loading…</p>}>{section.render(route)}</Suspense>
      </main>
    </div>
  )
}
