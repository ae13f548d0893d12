// The console's frame: the main navigation (a list of links, keyboard-reachable in order) and the
// page the hash route names. Each page lives in pages/ and reads the session for its API and rights.
import type { ReactNode } from 'react'
import { WorkspacePage } from './pages/workspace.js'
import { WorkspacesPage } from './pages/workspaces.js'
import { href, useRoute, type Route } from './router.js'
import { useSession } from './session.js'

interface Section {
  readonly path: string
  readonly label: string
  readonly render: (route: Route) => ReactNode
}

const SECTIONS: readonly Section[] = [
  { path: 'workspaces', label: 'Workspaces', render: (r) => (r.parts[1] ? <WorkspacePage id={r.parts[1]} /> : <WorkspacesPage route={r} />) },
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
      <main id="main">{section.render(route)}</main>
    </div>
  )
}
