import { ApiError, ChronicleHttp, ChronicleSocket, type SocketStatus, type WebSocketFactory } from '../client/index.js'

/**
 * The page's connection to the server that served it: the SDK over HTTP and
 * WebSocket, authenticated by the login cookie (same origin, so no token is
 * passed and the browser adds the cookie and the Origin itself).
 */

export interface Principal {
  readonly id: string
  readonly name: string
  readonly role: string
  /** a share link's visitor: the shared session, who shared it, until when (views/share-banner.tsx) */
  readonly share?: { readonly session: string; readonly by?: string; readonly expiresAt: string }
}

export type ConnectionStatus = 'connecting' | SocketStatus

export class Connection {
  readonly http = new ChronicleHttp({ url: location.origin })
  status: ConnectionStatus = 'connecting'
  statusReason: string | undefined
  private socketPromise: Promise<ChronicleSocket> | undefined
  private readonly listeners = new Set<() => void>()

  /** The one socket, opened on first use; it reconnects by itself and resumes its subscriptions. */
  socket(): Promise<ChronicleSocket> {
    this.socketPromise ??= ChronicleSocket.connect({
      url: location.origin,
      WebSocket: globalThis.WebSocket as unknown as WebSocketFactory,
      reconnect: { minMs: 250, maxMs: 4000 },
      onStatus: (status, reason) => this.setStatus(status, reason),
    }).then(
      (socket) => {
        this.setStatus('open')
        return socket
      },
      (err: unknown) => {
        this.socketPromise = undefined
        this.setStatus('closed', err instanceof Error ? err.message : String(err))
        throw err
      },
    )
    return this.socketPromise
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  private setStatus(status: ConnectionStatus, reason?: string): void {
    this.status = status
    this.statusReason = reason
    for (const l of this.listeners) l()
  }
}

/** Who the login cookie speaks for; undefined when there is none (401). */
export async function whoami(http: ChronicleHttp): Promise<Principal | undefined> {
  try {
    return await http.call('whoami', {})
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return undefined
    throw err
  }
}

export type LoginResult = 'ok' | 'invalid'

/** Exchanges the one-time code of a login link for the session cookie (POST /login). */
export async function login(code: string): Promise<LoginResult> {
  const res = await fetch('/login', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ code }),
    credentials: 'same-origin',
  })
  if (res.ok) return 'ok'
  // 410: a share link whose share was revoked or has expired
  if (res.status === 401 || res.status === 400 || res.status === 410) return 'invalid'
  throw new ApiError(res.status, 'LOGIN_FAILED', `the server answered ${res.status} to the login`)
}

export async function logout(): Promise<void> {
  await fetch('/logout', { method: 'POST', credentials: 'same-origin' })
}

/** A refusal's code and message as the page shows them. */
export function describeError(err: unknown): { code: string; message: string; details?: unknown } {
  if (err instanceof ApiError) return { code: err.code, message: err.message, details: err.details }
  return { code: 'ERROR', message: err instanceof Error ? err.message : String(err) }
}
