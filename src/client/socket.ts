import { ApiError } from './errors.js'
import type { ServerOptions } from './http.js'
import type { EventFrame, Method, ParamsOf, ResultOf } from './protocol.js'

/**
 * The protocol over WebSocket (docs/API.md "WebSocket protocol"), with
 * resume: each subscription keeps the seq of the last event it delivered,
 * and after a dropped connection the socket reconnects (with backoff) and
 * subscribes again from there. The log is the buffer, so nothing is missed,
 * and an event at or below the cursor is never delivered twice.
 *
 * Calls in flight when the connection drops fail with `CLOSED`, except the
 * ones that are safe to send again (reads, and `input.submit` with an
 * `inputId`, which the server deduplicates): those are sent again once the
 * socket is back.
 */

/** What the socket needs of a WebSocket: the browser's, Node 22's, or the `ws` package's. */
export interface WebSocketLike {
  readonly readyState: number
  send(data: string): void
  close(code?: number, reason?: string): void
  addEventListener(type: 'open', listener: () => void): void
  addEventListener(type: 'message', listener: (e: { data: unknown }) => void): void
  addEventListener(type: 'close', listener: (e: { code: number; reason: string }) => void): void
  addEventListener(type: 'error', listener: (e: { message?: string; error?: unknown }) => void): void
}
export type WebSocketFactory = new (url: string, protocols: string[]) => WebSocketLike

export type SocketStatus = 'open' | 'reconnecting' | 'closed'

export interface SocketOptions extends ServerOptions {
  /** reconnect after a dropped connection (default on); delays grow from minMs to maxMs */
  readonly reconnect?: false | { readonly minMs?: number; readonly maxMs?: number; readonly attempts?: number }
  /** the WebSocket class; default the global one, else the `ws` package */
  readonly WebSocket?: WebSocketFactory
  /** the connection's state: `reconnecting` after a drop, `closed` when it will not come back */
  readonly onStatus?: (status: SocketStatus, reason?: string) => void
  /** server messages that are not replies or events: heartbeat, closing */
  readonly onMessage?: (message: Record<string, unknown>) => void
}

export interface SubscribeOptions {
  readonly sessions: readonly string[] | '*'
  /** deliver events with a seq above this (default 0: from the start) */
  readonly after?: number
  readonly types?: readonly string[]
}

export interface Subscription {
  /** the seq up to which everything has been delivered: where a resume starts */
  readonly last: number
  /** resolves with the head once the stored events have been delivered */
  readonly caughtUp: Promise<number>
  close(): Promise<void>
}

const PROTOCOL = 'chronicle.v1'
const TOKEN_PREFIX = 'chronicle.token.'
/** close codes after which reconnecting cannot help: revoked token, policy refusal */
const FINAL_CLOSE_CODES = new Set([1008, 4401])

/** Methods whose second sending changes nothing. */
const RESENDABLE = new Set<string>([
  'hello',
  'session.get',
  'session.list',
  'session.state',
  'session.context',
  'session.history',
  'session.files',
  'session.diff',
  'permission.rules',
  'token.list',
  'whoami',
  'search',
])

interface Pending {
  readonly frame: string
  readonly resendable: boolean
  /** runs as the reply is read, before any later frame of the same read (a subscription's first events) */
  readonly onResult?: (result: unknown) => void
  readonly resolve: (value: unknown) => void
  readonly reject: (error: Error) => void
}

class SubscriptionState implements Subscription {
  last: number
  sub: string | undefined
  closed = false
  readonly caughtUp: Promise<number>
  resolveCaughtUp: (head: number) => void = () => {}
  rejectCaughtUp: (error: Error) => void = () => {}

  constructor(
    readonly options: SubscribeOptions,
    readonly onEvent: (frame: EventFrame) => void,
    private readonly socket: ChronicleSocket,
  ) {
    this.last = options.after ?? 0
    this.caughtUp = new Promise((resolve, reject) => {
      this.resolveCaughtUp = resolve
      this.rejectCaughtUp = reject
    })
    this.caughtUp.catch(() => {}) // a caller that never awaits it must not see an unhandled rejection
  }

  close(): Promise<void> {
    return this.socket.unsubscribe(this)
  }
}

export class ChronicleSocket {
  private ws: WebSocketLike | undefined
  private n = 0
  private readonly pending = new Map<string, Pending>()
  private readonly subscriptions = new Set<SubscriptionState>()
  private readonly bySub = new Map<string, SubscriptionState>()
  private closedByUser = false
  private attempt = 0
  private finalReason: string | undefined
  private retry: ReturnType<typeof setTimeout> | undefined

  private constructor(
    private readonly options: SocketOptions,
    private readonly WebSocketClass: WebSocketFactory,
  ) {}

  /** Opens a connection; rejects with `UNREACHABLE`, `UNAUTHORIZED` or `REFUSED` when the first one fails. */
  static async connect(options: SocketOptions): Promise<ChronicleSocket> {
    const WebSocketClass =
      options.WebSocket ??
      ((globalThis as { WebSocket?: WebSocketFactory }).WebSocket as WebSocketFactory | undefined) ??
      ((await import('ws')).default as unknown as WebSocketFactory)
    const socket = new ChronicleSocket(options, WebSocketClass)
    await socket.open()
    return socket
  }

  get url(): string {
    return `${this.options.url.replace(/\/+$/, '').replace(/^http/, 'ws')}/ws`
  }

  /** Sends a command and resolves with its result (rejects with the server's error as an ApiError). */
  call<M extends Method>(method: M, params?: ParamsOf<M>): Promise<ResultOf<M>> {
    return this.send(method, params)
  }

  private send<M extends Method>(
    method: M,
    params?: ParamsOf<M>,
    onResult?: (result: ResultOf<M>) => void,
  ): Promise<ResultOf<M>> {
    const id = `c${++this.n}`
    const frame = JSON.stringify({ id, method, ...(params !== undefined && { params }) })
    const resendable =
      RESENDABLE.has(method) ||
      (method === 'input.submit' && typeof (params as { inputId?: unknown } | undefined)?.inputId === 'string')
    return new Promise((resolve, reject) => {
      if (this.closedByUser || this.finalReason !== undefined) {
        reject(new ApiError(0, 'CLOSED', `connection closed${this.finalReason ? ` (${this.finalReason})` : ''}`))
        return
      }
      this.pending.set(id, {
        frame,
        resendable,
        resolve: resolve as (v: unknown) => void,
        reject,
        ...(onResult && { onResult: onResult as (result: unknown) => void }),
      })
      if (this.ws?.readyState === 1) this.ws.send(frame)
      else if (!resendable) {
        this.pending.delete(id)
        reject(new ApiError(0, 'CLOSED', 'not connected (reconnecting)'))
      }
    })
  }

  /**
   * Subscribes and delivers each event once, in seq order, across reconnects.
   * Resolves once the server accepted the subscription.
   */
  async subscribe(options: SubscribeOptions, onEvent: (frame: EventFrame) => void): Promise<Subscription> {
    const state = new SubscriptionState(options, onEvent, this)
    this.subscriptions.add(state)
    try {
      await this.sendSubscribe(state)
    } catch (err) {
      this.subscriptions.delete(state)
      throw err
    }
    return state
  }

  /** @internal through Subscription.close */
  async unsubscribe(state: SubscriptionState): Promise<void> {
    if (state.closed) return
    state.closed = true
    this.subscriptions.delete(state)
    const sub = state.sub
    if (sub === undefined) return
    this.bySub.delete(sub)
    if (this.ws?.readyState === 1) await this.call('unsubscribe', { sub }).catch(() => {})
  }

  close(): void {
    this.closedByUser = true
    clearTimeout(this.retry)
    this.ws?.close(1000)
    this.failPending(new ApiError(0, 'CLOSED', 'connection closed'))
  }

  private async sendSubscribe(state: SubscriptionState): Promise<void> {
    const { sessions, types } = state.options
    // mapped as the reply is read: the server sends the first events right behind it
    await this.send('subscribe', { sessions, after: state.last, ...(types && { types }) }, ({ sub }) => {
      if (state.closed) return
      state.sub = sub
      this.bySub.set(sub, state)
    })
  }

  private open(): Promise<void> {
    const protocols = [PROTOCOL, ...(this.options.token ? [`${TOKEN_PREFIX}${this.options.token}`] : [])]
    const ws = new this.WebSocketClass(this.url, protocols)
    this.ws = ws
    return new Promise((resolve, reject) => {
      let opened = false
      ws.addEventListener('open', () => {
        opened = true
        this.attempt = 0
        resolve()
        this.options.onStatus?.('open')
      })
      ws.addEventListener('error', (e) => {
        if (opened) return
        const message = e.message ?? (e.error instanceof Error ? e.error.message : '')
        const status = Number(/server response: (\d+)/.exec(message)?.[1] ?? 0)
        reject(
          status === 401
            ? new ApiError(401, 'UNAUTHORIZED', 'the server refused the token (401)')
            : status
              ? new ApiError(status, 'REFUSED', `the server refused the connection (${status})`)
              : new ApiError(0, 'UNREACHABLE', `no Chronicle server at ${this.options.url}`),
        )
      })
      ws.addEventListener('message', (e) => this.onFrame(String(e.data)))
      ws.addEventListener('close', (e) => {
        if (!opened) return
        this.onClosed(e.code, e.reason)
      })
    })
  }

  private onFrame(raw: string): void {
    let frame: Record<string, unknown>
    try {
      frame = JSON.parse(raw) as Record<string, unknown>
    } catch {
      return
    }
    const id = frame.id
    if (typeof id === 'string' && this.pending.has(id)) {
      const p = this.pending.get(id) as Pending
      this.pending.delete(id)
      const error = frame.error as { code: string; message: string; details?: unknown } | undefined
      if (error) p.reject(new ApiError(0, error.code, `${error.code}: ${error.message}`, error.details))
      else {
        p.onResult?.(frame.result)
        p.resolve(frame.result)
      }
      return
    }
    if (frame.type === 'event') {
      const state = this.bySub.get(frame.sub as string)
      const seq = frame.seq as number
      if (!state || state.closed || seq <= state.last) return
      state.last = seq
      state.onEvent(frame as unknown as EventFrame)
      return
    }
    if (frame.type === 'caught-up') {
      const state = this.bySub.get(frame.sub as string)
      if (!state) return
      // every event up to the head the server read has been sent: resuming from it skips nothing
      state.last = Math.max(state.last, frame.seq as number)
      state.resolveCaughtUp(frame.seq as number)
      return
    }
    if (frame.type === 'closing' && frame.reason === 'revoked') this.finalReason = 'revoked'
    this.options.onMessage?.(frame)
  }

  private onClosed(code: number, reason: string): void {
    this.bySub.clear()
    for (const s of this.subscriptions) s.sub = undefined
    const reconnect = this.options.reconnect ?? {}
    if (FINAL_CLOSE_CODES.has(code)) this.finalReason ??= reason || `close code ${code}`
    if (this.closedByUser || reconnect === false || this.finalReason !== undefined) {
      this.failPending(new ApiError(0, 'CLOSED', `connection closed (${this.finalReason ?? code})`))
      for (const s of this.subscriptions) s.rejectCaughtUp(new ApiError(0, 'CLOSED', 'connection closed'))
      if (!this.closedByUser) this.options.onStatus?.('closed', this.finalReason ?? String(code))
      return
    }
    // what cannot be sent again fails now; the rest waits for the next connection
    for (const [id, p] of this.pending)
      if (!p.resendable) {
        this.pending.delete(id)
        p.reject(new ApiError(0, 'CLOSED', `connection closed (${code}) before the reply`))
      }
    this.options.onStatus?.('reconnecting', reason || String(code))
    this.scheduleReconnect(reconnect)
  }

  private scheduleReconnect(policy: { minMs?: number; maxMs?: number; attempts?: number }): void {
    const attempt = ++this.attempt
    if (policy.attempts !== undefined && attempt > policy.attempts) {
      this.finalReason = 'gave up reconnecting'
      this.failPending(new ApiError(0, 'CLOSED', 'connection lost: gave up reconnecting'))
      this.options.onStatus?.('closed', this.finalReason)
      return
    }
    const min = policy.minMs ?? 250
    const delay = Math.min(policy.maxMs ?? 5000, min * 2 ** (attempt - 1))
    this.retry = setTimeout(() => {
      if (this.closedByUser) return
      this.open().then(
        () => this.resume(),
        () => this.scheduleReconnect(policy),
      )
    }, delay)
  }

  /** After a reconnect: each subscription again from its cursor, then the calls that waited. */
  private resume(): void {
    for (const p of this.pending.values()) this.ws?.send(p.frame)
    for (const state of this.subscriptions)
      this.sendSubscribe(state).catch((err: Error) => {
        this.subscriptions.delete(state)
        state.rejectCaughtUp(err)
        this.options.onMessage?.({ type: 'subscription-lost', error: err.message })
      })
  }

  private failPending(error: Error): void {
    for (const p of this.pending.values()) p.reject(error)
    this.pending.clear()
  }
}
