import { render } from 'preact'
import { useEffect, useLayoutEffect, useState } from 'preact/hooks'
import type { ChronicleSocket } from '../client/index.js'
import { logout, type Principal, whoami } from './connection.js'
import { parseRoute, type Route, searchHash } from './route.js'
import { highlightHit } from './search-highlight.js'
import type { Start } from './start.js'
import { SearchPage } from './views/search-page.js'
import { ErrorNote } from './ui.js'
import { AdminPage } from './views/admin-page.js'
import { SessionList } from './views/session-list.js'
import { SessionPage } from './views/session-page.js'
import { ShareBanner } from './views/share-banner.js'
import { Shortcuts } from './views/shortcuts.js'

/**
 * The page: log in (a link's one-time code → the session cookie), then the
 * views by route. At `/login#<code>` the code is exchanged (POST /login) and
 * the address becomes `/#/`; a refused code shows that the link is invalid
 * or expired, and no session starts. Without a cookie the page asks for the
 * link the server printed. docs/WEB.md.
 */

type Phase =
  | { readonly kind: 'starting' }
  | { readonly kind: 'link-invalid' }
  | { readonly kind: 'logged-out' }
  | { readonly kind: 'failed'; readonly error: unknown }
  | { readonly kind: 'ready'; readonly who: Principal; readonly socket: ChronicleSocket }

/** Draws the page into #app once its views have loaded; `start` began before them (main.tsx). */
export function mount(start: Start): void {
  performance.mark('chronicle:script') // the views' script has run (a cold open's parts: bench/web.ts)
  const root = document.getElementById('app')
  if (root) render(<App start={start} />, root)
}

export function App({ start }: { start: Start }) {
  const connection = start.connection
  const [phase, setPhase] = useState<Phase>({ kind: 'starting' })
  const route = useRoute()

  // a layout effect: what start.ts found is shown right after the first render, not a frame later
  useLayoutEffect(() => {
    void (async () => {
      try {
        const started = await start.started
        setPhase(started)
        if (started.kind !== 'ready') return
        const socket = started.socket
        // A browser cannot see why a WebSocket upgrade failed: while reconnecting, ask over HTTP whether the
        // web session still holds (it ends with a logout elsewhere, its 30 days, or its token's revocation).
        let checking = false
        const check = () => {
          if (connection.status !== 'reconnecting' || checking) return
          checking = true
          setTimeout(async () => {
            const who = await whoami(connection.http).catch(() => 'unreachable' as const)
            checking = false
            if (connection.status !== 'reconnecting') return
            if (who === undefined) {
              socket.close()
              setPhase({ kind: 'logged-out' })
            } else check() // the server is away, or back and the socket not yet: ask again
          }, 3000)
        }
        connection.onChange(check)
      } catch (error) {
        setPhase({ kind: 'failed', error })
      }
    })()
  }, [start, connection])

  switch (phase.kind) {
    case 'starting':
      return (
        <main class="centered">
          <p aria-busy="true">Starting…</p>
        </main>
      )
    case 'link-invalid':
      return (
        <main class="centered">
          <h1>This login link is invalid or has expired</h1>
          <p>
            A login link works once, within 10 minutes. Open a new one: <code>chronicle serve</code> prints one when it
            starts, and whoever holds a token can make one (<code>POST /login-links</code>). A share link works until it
            expires or is revoked: ask whoever shared it for a new one.
          </p>
        </main>
      )
    case 'logged-out':
      return (
        <main class="centered">
          <h1>Log in to Chronicle</h1>
          <p>
            Open the login link the server printed when it started (<code>open http://…/login#…</code>). It logs this
            browser in.
          </p>
        </main>
      )
    case 'failed':
      return (
        <main class="centered">
          <h1>Chronicle cannot be reached</h1>
          <ErrorNote error={phase.error} />
          <button type="button" onClick={() => location.reload()}>
            Try again
          </button>
        </main>
      )
    case 'ready':
      return <Shell start={start} who={phase.who} socket={phase.socket} route={route} />
  }
}

function Shell({ start, who, socket, route }: { start: Start; who: Principal; socket: ChronicleSocket; route: Route }) {
  const connection = start.connection
  const [, setTick] = useState(0)
  useEffect(() => connection.onChange(() => setTick((t) => t + 1)), [connection])
  const opened = route.view === 'at' ? `${route.id}@${route.seq}` : undefined
  // a search hit opened: its match highlighted in the transcript (search-highlight.ts)
  useEffect(() => (route.view === 'at' ? highlightHit(route.id, route.seq) : undefined), [opened])
  const navigate = (hash: string) => {
    location.hash = hash
  }
  const status = connection.status
  return (
    <div class="shell">
      <header class="top">
        <a href="#/" class="brand">
          Chronicle
        </a>
        <div class={`connection connection-${status}`} role="status" aria-live="polite">
          {status === 'reconnecting'
            ? 'Reconnecting…'
            : status === 'closed'
              ? `Disconnected${connection.statusReason ? ` (${connection.statusReason})` : ''}`
              : ''}
        </div>
        {status === 'closed' && (
          <button type="button" onClick={() => location.reload()}>
            Reload
          </button>
        )}
        <SearchBox q={route.view === 'search' ? route.q : ''} navigate={navigate} />
        {who.role === 'admin' && (
          <a href="#/admin" class="button">
            Admin
          </a>
        )}
        <span class="who-am-i">
          {who.name} <span class="role">({who.role})</span>
        </span>
        <button
          type="button"
          onClick={() => {
            void logout().finally(() => {
              location.href = '/'
            })
          }}
        >
          Log out
        </button>
      </header>
      <ShareBanner who={who} />
      <Shortcuts />
      <main class="content">
        {route.view === 'list' && <SessionList socket={socket} navigate={navigate} />}
        {route.view === 'admin' && <AdminPage socket={socket} />}
        {route.view === 'search' && <SearchPage socket={socket} q={route.q} />}
        {(route.view === 'session' || route.view === 'at') && (
          // one element for both modes: switching between live and the scrubber keeps the live model
          <SessionPage
            key={route.id}
            socket={socket}
            id={route.id}
            firstState={start.takeState}
            at={route.view === 'at' ? route.seq : undefined}
            navigate={navigate}
          />
        )}
        {route.view === 'unknown' && (
          <div>
            <h1>No such page</h1>
            <p>
              <a href="#/">The session list</a>
            </p>
          </div>
        )}
      </main>
    </div>
  )
}

/** The search box in the header: a query opens `#/search/<q>` (docs/SEARCH.md). */
function SearchBox({ q, navigate }: { q: string; navigate: (hash: string) => void }) {
  const [text, setText] = useState(q)
  useEffect(() => setText(q), [q])
  return (
    <search class="search-box">
      <form
        onSubmit={(e) => {
          e.preventDefault()
          if (text.trim() !== '') navigate(searchHash(text.trim()))
        }}
      >
        <input
          type="search"
          aria-label="Search every session"
          placeholder="Search sessions…"
          value={text}
          onInput={(e) => setText(e.currentTarget.value)}
          spellcheck={false}
        />
      </form>
    </search>
  )
}

function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname === '/login' ? '#/' : location.hash))
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(location.hash))
    window.addEventListener('hashchange', onChange)
    return () => window.removeEventListener('hashchange', onChange)
  }, [])
  return route
}
