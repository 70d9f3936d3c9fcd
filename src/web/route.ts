/**
 * The page's routes live in the URL's fragment, so the server answers one
 * index.html for all of them (docs/WEB.md):
 *
 *   #/               the session list
 *   #/admin          tokens and MCP servers (an admin's)
 *   #/s/<id>         a session, live
 *   #/s/<id>@<seq>   the session as it was right after event <seq> (the timeline scrubber)
 *   #/s/<id>@        the scrubber at the session's latest event
 *   #/search/<q>     full-text search over every session (docs/SEARCH.md), the query URI-encoded
 */
export type Route =
  | { readonly view: 'list' }
  | { readonly view: 'admin' }
  | { readonly view: 'session'; readonly id: string }
  | { readonly view: 'at'; readonly id: string; readonly seq: number | null }
  | { readonly view: 'search'; readonly q: string }
  | { readonly view: 'unknown'; readonly hash: string }

const SESSION = /^#\/s\/([A-Za-z0-9_-]+)(?:@(\d*))?\/?$/
const SEARCH = /^#\/search(?:\/(.*))?$/

export function parseRoute(hash: string): Route {
  if (hash === '' || hash === '#' || hash === '#/') return { view: 'list' }
  if (hash === '#/admin') return { view: 'admin' }
  const search = SEARCH.exec(hash)
  if (search) {
    try {
      return { view: 'search', q: decodeURIComponent(search[1] ?? '') }
    } catch {
      return { view: 'unknown', hash }
    }
  }
  const m = SESSION.exec(hash)
  if (!m) return { view: 'unknown', hash }
  const id = m[1] as string
  if (m[2] === undefined) return { view: 'session', id }
  return { view: 'at', id, seq: m[2] === '' ? null : Number(m[2]) }
}

export function routeHash(route: Route): string {
  switch (route.view) {
    case 'list':
      return '#/'
    case 'admin':
      return '#/admin'
    case 'session':
      return `#/s/${route.id}`
    case 'at':
      return `#/s/${route.id}@${route.seq ?? ''}`
    case 'search':
      return `#/search/${encodeURIComponent(route.q)}`
    case 'unknown':
      return route.hash
  }
}

export const sessionHash = (id: string) => routeHash({ view: 'session', id })
export const atHash = (id: string, seq: number | null) => routeHash({ view: 'at', id, seq })
export const searchHash = (q: string) => routeHash({ view: 'search', q })
