import type { ChronicleSocket, StateView } from '../client/index.js'
import { type Connection, login, type Principal, whoami } from './connection.js'
import { parseRoute } from './route.js'

/**
 * What the page does before its views have loaded (main.tsx starts it at
 * once, while the views' chunk is still being compiled, docs/WEB.md "The
 * cold open"): at `/login#<code>` the code is exchanged for the cookie;
 * then `GET /whoami`; with a principal, the socket, and — beside it, for an
 * address that names a session — that session's state over HTTP, which the
 * session page takes as its first state and subscribes after. Nothing but
 * `/whoami` is asked before the cookie is known to hold: a logged-out page
 * sees no refused upgrade and no second 401.
 */

export type Started =
  | { readonly kind: 'link-invalid' }
  | { readonly kind: 'logged-out' }
  | { readonly kind: 'ready'; readonly who: Principal; readonly socket: ChronicleSocket }

export class Start {
  readonly started: Promise<Started>
  private ahead: { readonly id: string; readonly state: Promise<StateView> } | undefined

  constructor(readonly connection: Connection) {
    this.started = this.run()
    this.started.catch(() => {}) // the page shows the failure once it has loaded: not an unhandled rejection before
  }

  /** The state read ahead for session `id`, once (undefined for another session, or when none was read). */
  readonly takeState = (id: string): Promise<StateView> | undefined => {
    const ahead = this.ahead
    if (ahead?.id !== id) return undefined
    this.ahead = undefined
    return ahead.state
  }

  private async run(): Promise<Started> {
    if (location.pathname === '/login') {
      const code = decodeURIComponent(location.hash.slice(1))
      // the code is spent either way: take it out of the address bar and the history
      history.replaceState(null, '', '/login')
      if (code === '' || (await login(code)) === 'invalid') return { kind: 'link-invalid' }
      history.replaceState(null, '', '/#/')
      window.dispatchEvent(new HashChangeEvent('hashchange'))
    }
    // the socket only once the check finds a login: started beside it, it saved ~3 ms of a cold open and cost
    // a logged-out page a refused upgrade in its console
    const who = await whoami(this.connection.http)
    performance.mark('chronicle:whoami')
    if (!who) return { kind: 'logged-out' }
    const route = parseRoute(location.hash)
    if (route.view === 'session' || route.view === 'at') {
      const state = this.connection.http.call('session.state', { session: route.id })
      // a failed read ahead is read again over the socket (live-session.ts); its arrival is a cold open's part (bench/web.ts)
      state.then(
        () => performance.mark('chronicle:state'),
        () => {},
      )
      this.ahead = { id: route.id, state }
    }
    const socket = await this.connection.socket()
    performance.mark('chronicle:socket')
    return { kind: 'ready', who, socket }
  }
}
