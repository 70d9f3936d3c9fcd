import type { RawData, WebSocket } from 'ws'
import { z } from 'zod'
import { EVENT_TYPES } from '../../events/catalogue.js'
import { ChronicleError } from '../../events/errors.js'
import { type Caller, isMethod, Params, parseParams, type Api } from '../api.js'
import { authorize } from '../authorize.js'
import { SubscriptionReach } from '../reach.js'
import type { Principal } from '../principals.js'
import type { AppDeps } from '../deps.js'
import { errorBody, toProblem } from '../problem.js'
import type { SessionFanout } from './fanout.js'
import { closingFrame, errorFrame, heartbeatFrame, resultFrame, type RequestId } from './frames.js'
import { SubscriptionPump } from './pump.js'

/**
 * One client connection speaking the protocol (docs/API.md): commands with
 * ids get exactly one reply each; subscriptions stream through pumps;
 * heartbeats carry the head. Nothing a client sends can crash the
 * connection: every failure becomes an error reply.
 */

const Envelope = z.object({
  id: z.union([z.string().min(1).max(200), z.number().int()]),
  method: z.string().min(1).max(100),
  params: z.record(z.string(), z.unknown()).optional(),
})

const SubscribeParams = z.object({
  sessions: z.union([z.literal('*'), z.array(z.string().min(1).max(200)).min(1).max(1000)]),
  after: z.number().int().nonnegative().optional(),
  types: z
    .array(z.enum(EVENT_TYPES as [string, ...string[]]))
    .min(1)
    .optional(),
})
const UnsubscribeParams = z.object({ sub: z.string().min(1) })
const HelloParams = z.object({ protocol: z.literal(1) })

const MAX_SUBSCRIPTIONS = 100
/** commands per second per connection; more are answered RATE_LIMITED without being run */
const MAX_COMMANDS_PER_SECOND = 500

let nextConnection = 1

const KNOWN_METHODS: ReadonlySet<string> = new Set(['hello', 'subscribe', 'unsubscribe', ...Object.keys(Params)])

/** The close code of a socket whose token was revoked (docs/API.md "Closing codes"). */
export const REVOKED_CLOSE_CODE = 4401

export class Connection {
  /** named in the meta of every event this connection's commands cause */
  readonly id: string
  private readonly pumps = new Map<string, SubscriptionPump>()
  private nextSub = 1
  private readonly heartbeat: NodeJS.Timeout
  private closing = false
  private window = { start: 0, count: 0 }
  private alive = true
  private disposed = false

  constructor(
    private readonly socket: WebSocket,
    private readonly deps: AppDeps,
    private readonly api: Api,
    /** the app's one fan-out of the log's commits, shared by every connection */
    private readonly fanout: SessionFanout,
    /** who this socket's token speaks for; checked again on every command (a token revoked meanwhile stops) */
    readonly principal: Principal,
  ) {
    this.id = `conn_${(nextConnection++).toString(36)}_${Date.now().toString(36)}`
    // Listeners attach synchronously: frames that arrive before an await would be lost.
    socket.on('message', (data, isBinary) => void this.onMessage(data, isBinary))
    socket.on('close', () => this.dispose())
    socket.on('error', () => this.dispose())
    socket.on('pong', () => (this.alive = true))
    this.heartbeat = setInterval(() => this.beat(), deps.limits.heartbeatMs)
    this.heartbeat.unref()
  }

  /** The heartbeat frame, plus a ping: a peer that answered no ping since the last beat is gone (half-open TCP). */
  private beat(): void {
    if (!this.alive) {
      this.socket.terminate()
      return
    }
    this.alive = false
    this.send(heartbeatFrame(this.fanout.head))
    if (this.socket.readyState === this.socket.OPEN) this.socket.ping()
  }

  /** Each subscription's lag behind the head, in events (docs/OBSERVABILITY.md). */
  lags(head: number): number[] {
    return [...this.pumps.values()].map((pump) => pump.lag(head))
  }

  /** Tells the client why it is being closed and from where to resume, then closes. */
  close(reason: 'slow-consumer' | 'shutdown' | 'revoked', code: number): void {
    if (this.closing) return
    this.closing = true
    const cursors = Object.fromEntries([...this.pumps].map(([id, p]) => [id, p.cursor]))
    const after = Math.min(...Object.values(cursors), this.fanout.head)
    for (const pump of this.pumps.values()) pump.stop()
    this.send(closingFrame(reason, after, cursors))
    this.socket.close(code, reason)
    // A client that does not read would hold the close handshake open: cut it after a grace period.
    setTimeout(() => this.socket.terminate(), 2000).unref()
  }

  private async onMessage(data: RawData, isBinary: boolean): Promise<void> {
    if (isBinary)
      return this.send(
        errorFrame(null, { code: 'BAD_REQUEST', message: 'binary frames are not supported; send JSON text' }),
      )
    let json: unknown
    try {
      json = JSON.parse(data.toString())
    } catch {
      return this.send(errorFrame(null, { code: 'BAD_REQUEST', message: 'malformed JSON' }))
    }
    const envelope = Envelope.safeParse(json)
    if (!envelope.success) {
      const id = usableId(json)
      return this.send(errorFrame(id, errorBody(toProblem(envelope.error))))
    }
    const { id, method, params } = envelope.data
    const now = Date.now()
    if (now - this.window.start >= 1000) this.window = { start: now, count: 0 }
    if (++this.window.count > MAX_COMMANDS_PER_SECOND) {
      return this.send(
        errorFrame(id, { code: 'RATE_LIMITED', message: `more than ${MAX_COMMANDS_PER_SECOND} commands per second` }),
      )
    }
    // a span per call when traces are on, named by the method when it is one (a name is not the client's to choose)
    const span = this.deps.tracing?.start(`ws ${KNOWN_METHODS.has(method) ? method : 'unknown'}`, {
      'rpc.system': 'chronicle',
      'rpc.method': KNOWN_METHODS.has(method) ? method : 'unknown',
    })
    try {
      const result = await this.dispatch(method, params, {
        principal: this.principal,
        connection: this.id,
        commandId: String(id),
        ...(span && { trace: span.traceparent }),
      })
      this.send(resultFrame(id, result))
      span?.end()
    } catch (err) {
      const problem = toProblem(err)
      span?.end(problem.code)
      if (problem.internal)
        this.deps.logger.error(
          { err, method, ...(span && { trace_id: span.traceId, span_id: span.spanId }) },
          'command failed',
        )
      this.send(errorFrame(id, errorBody(problem)))
    }
  }

  private async dispatch(method: string, params: unknown, caller: Caller): Promise<unknown> {
    if (!this.deps.principals?.stillValid(this.principal))
      throw new ChronicleError('UNAUTHORIZED', 'this token was revoked or has expired')
    switch (method) {
      case 'hello':
        HelloParams.parse(params ?? {})
        return { protocol: 1, server: { version: this.deps.version }, head: await this.deps.ports.log.head() }
      case 'subscribe': {
        const p = SubscribeParams.parse(params ?? {})
        await authorize(
          this.deps.ports.readModels,
          caller,
          'subscribe',
          p.sessions === '*' ? {} : { sessions: p.sessions },
        )
        return this.subscribe(p)
      }
      case 'unsubscribe': {
        const { sub } = UnsubscribeParams.parse(params ?? {})
        const pump = this.pumps.get(sub)
        if (!pump) throw new ChronicleError('BAD_REQUEST', `no subscription ${sub} on this connection`)
        pump.stop()
        this.pumps.delete(sub)
        return {}
      }
      default:
        if (!isMethod(method)) throw new ChronicleError('UNKNOWN_METHOD', `unknown method ${method}`)
        return (this.api[method] as (p: unknown, c: Caller) => unknown)(parseParams(method, params), caller)
    }
  }

  private async subscribe(p: z.infer<typeof SubscribeParams>): Promise<{ sub: string; head: number }> {
    const { log, readModels } = this.deps.ports
    if (this.pumps.size >= MAX_SUBSCRIPTIONS)
      throw new ChronicleError('RATE_LIMITED', `at most ${MAX_SUBSCRIPTIONS} subscriptions per connection`)
    if (p.sessions !== '*') {
      const found = await Promise.all(p.sessions.map((id) => readModels.session(id)))
      const missing = p.sessions.find((_, i) => !found[i])
      if (missing) throw new ChronicleError('SESSION_NOT_FOUND', `no session ${missing}`)
    }
    const head = await log.head()
    const after = p.after ?? 0
    if (after > head)
      throw new ChronicleError('SEQ_OUT_OF_RANGE', `after=${after} is beyond the head of the log (${head})`)
    // what was read took a while: the connection may have closed meanwhile, or subscribed to its limit
    if (this.closing || !this.isOpen())
      throw new ChronicleError('BAD_REQUEST', 'the connection closed while subscribing')
    if (this.pumps.size >= MAX_SUBSCRIPTIONS)
      throw new ChronicleError('RATE_LIMITED', `at most ${MAX_SUBSCRIPTIONS} subscriptions per connection`)
    const id = `s${this.nextSub++}`
    let pump: SubscriptionPump | undefined
    // a token limited to some sessions hears only those, whatever it subscribed to (`*` included)
    const { sessions } = this.principal
    const reach = sessions ? new SubscriptionReach(readModels, { ...this.principal, sessions }) : undefined
    const filter = { sessions: p.sessions, ...(p.types && { types: p.types }) }
    const subscription = this.fanout.subscribe(filter, after, {
      head,
      onCaughtUp: (seq) => pump?.caughtUp(seq),
    })
    pump = new SubscriptionPump(id, this.socket, subscription, after, {
      highWaterBytes: this.deps.limits.socketHighWaterBytes,
      stallMs: this.deps.limits.slowConsumerMs,
      onSlowConsumer: () => {
        this.deps.metrics?.slowConsumerDropped()
        this.close('slow-consumer', 4008)
      },
      ...(reach && { reach }),
    })
    this.pumps.set(id, pump)
    // The reply goes out first; the pump starts on the next turn, after it.
    setImmediate(() => {
      if (this.pumps.get(id) === pump)
        void pump.run().catch((err: unknown) => this.deps.logger.error({ err }, 'subscription failed'))
    })
    return { sub: id, head }
  }

  private send(frame: string): void {
    if (this.socket.readyState === this.socket.OPEN) this.socket.send(frame)
  }

  /** Whether the socket is still open (a subscription made after it closed would never be stopped). */
  private isOpen(): boolean {
    return !this.disposed && this.socket.readyState === this.socket.OPEN
  }

  private dispose(): void {
    this.disposed = true
    clearInterval(this.heartbeat)
    for (const pump of this.pumps.values()) pump.stop()
    this.pumps.clear()
  }
}

/** The id of a message whose envelope failed validation, when it still has a usable one. */
function usableId(json: unknown): RequestId {
  if (typeof json !== 'object' || json === null) return null
  const id = (json as { id?: unknown }).id
  return (typeof id === 'string' && id.length > 0 && id.length <= 200) ||
    (typeof id === 'number' && Number.isInteger(id))
    ? id
    : null
}
