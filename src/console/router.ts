// Hash routes (`#/workspaces/ws_…`): the server serves one page at `/`, so any console URL can be
// bookmarked and reloaded without a server-side fallback route.
import { useEffect, useState } from 'react'

export interface Route {
  /** Path segments after `#/`, decoded. */
  readonly parts: readonly string[]
  readonly params: URLSearchParams
}

export function parseHash(hash: string): Route {
  const raw = hash.replace(/^#\/?/, '')
  const [path = '', qs = ''] = raw.split('?', 2)
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(qs) }
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash))
  useEffect(() => {
    const onChange = () => setRoute(parseHash(location.hash))
    window.addEventListener('hashchange', onChange)
    return () => window.removeEventListener('hashchange', onChange)
  }, [])
  return route
}

/** `#/a/b?x=1` for segments and query (empty values dropped). */
export function href(parts: readonly string[], params: Record<string, string | undefined> = {}): string {
  const qs = new URLSearchParams(Object.entries(params).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== '')).toString()
  return `#/${parts.map(encodeURIComponent).join('/')}${qs ? `?${qs}` : ''}`
}

export function navigate(parts: readonly string[], params: Record<string, string | undefined> = {}): void {
  location.hash = href(parts, params)
}
