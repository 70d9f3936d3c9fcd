import type { StoredEvent, StoredEventOf } from '../../events/envelope.js'
import type { EventLog } from '../../events/log.js'
import type { StorePorts } from '../../projections/store-ports.js'

/**
 * A person's reject stops the run (docs/TOOLS.md "A reject stops the run"), as OpenCode's
 * loop stops on its RejectedError. What counts is a `permission.replied {reply: reject}`
 * that a person gave (`meta.actor: user` — the reply command, and its cascade to the
 * session's other pending requests) **without a message**, after the run's `run.started`,
 * to a request of the run's own calls. Requests are raised in the top session of a
 * sub-agent chain: a session's own are those there without `from` when it is the top,
 * else those with `from.sessionId` naming it. So a reject of a sub-agent's call stops the
 * sub-agent's run (its task call then returns); the parent goes on, as in OpenCode.
 *
 * A reject with a message is guidance for the model (OpenCode's CorrectedError): the
 * run goes on and the model reads it. Rejections nobody typed — a deny rule (no request
 * at all), the gate closing an abandoned request, a cancel, fork settlement, recovery
 * closing a sub-agent's ask — carry a message or another actor and never count.
 *
 * The decision is read from the log, so a run resumed after a restart stops exactly
 * as the live one would have; the commit stream only says when the log is worth reading.
 */

export interface Rejection {
  readonly requestId: string
  /** the seq of the reply */
  readonly seq: number
}

/** A person's reject without a message. */
export function isPlainReject(e: StoredEvent): e is StoredEventOf<'permission.replied'> {
  return (
    e.type === 'permission.replied' && e.data.reply === 'reject' && !e.data.message?.trim() && e.meta.actor === 'user'
  )
}

/** Where a session's requests are raised and answered: the top of its sub-agent chain. */
export async function topSessionOf(ports: RejectionPorts, sessionId: string): Promise<string> {
  let id = sessionId
  for (let depth = 0; depth < MAX_CHAIN; depth++) {
    // a parent is decided at creation, committed before any run: nothing queued can change it
    const parent = (await ports.readModels.session(id, { committed: true }))?.parent?.sessionId
    if (!parent) return id
    id = parent
  }
  return id
}

/** The first reject that stops the run, if any — from the log only. */
export async function rejectionInRun(
  ports: RejectionPorts,
  sessionId: string,
  runId: string,
): Promise<Rejection | undefined> {
  const { log } = ports
  const started = (await log.readSessionOfType(sessionId, 'run.started')).findLast(
    (e) => e.type === 'run.started' && e.data.runId === runId,
  )
  if (!started) return undefined
  const top = await topSessionOf(ports, sessionId)
  const replies = (await log.readSessionOfType(top, 'permission.replied'))
    .filter((e) => e.seq > started.seq)
    .filter(isPlainReject)
  if (replies.length === 0) return undefined
  const own = new Set(
    (await log.readSessionOfType(top, 'permission.requested')).flatMap((e) =>
      e.type === 'permission.requested' && (e.data.from?.sessionId ?? top) === sessionId ? [e.data.requestId] : [],
    ),
  )
  const stops = replies.find((e) => own.has(e.data.requestId))
  return stops && { requestId: stops.data.requestId, seq: stops.seq }
}

export type RejectionPorts = Pick<StorePorts, 'log' | 'readModels'>

export interface RejectionWatch {
  /** the reject that stops the run, if any; reads the log only when a candidate was committed since the last look */
  check(): Promise<Rejection | undefined>
  close(): void
}

/**
 * Watches one run for a reject that stops it. A resumed run reads the log at its first
 * check (the reject may predate the restart); a new run only once a person's reject was
 * committed in the session where its requests are answered.
 */
export async function watchRejections(
  ports: RejectionPorts,
  sessionId: string,
  runId: string,
  opts: { readonly resumed: boolean },
): Promise<RejectionWatch> {
  const top = await topSessionOf(ports, sessionId)
  let dirty = opts.resumed
  let found: Rejection | undefined
  const unsubscribe = rejectsOf(ports.log).watch(top, () => {
    dirty = true
  })
  return {
    async check() {
      if (found || !dirty) return found
      dirty = false
      found = await rejectionInRun(ports, sessionId, runId)
      return found
    },
    close: () => {
      unsubscribe()
    },
  }
}

/**
 * One commit listener per store for every watching run, keyed by the session whose
 * rejects they wait for: a listener per run would scan every commit once per
 * running session, a cost per event that grows with the sessions streaming.
 */
class RejectsBySession {
  private readonly watchers = new Map<string, Set<() => void>>()
  private unsubscribe: (() => void) | undefined

  constructor(private readonly log: EventLog) {}

  watch(sessionId: string, onReject: () => void): () => void {
    const set = this.watchers.get(sessionId) ?? new Set()
    this.watchers.set(sessionId, set)
    set.add(onReject)
    this.unsubscribe ??= this.log.onCommit((events) => {
      for (const e of events) {
        if (e.type !== 'permission.replied' || !isPlainReject(e)) continue
        for (const wake of this.watchers.get(e.sessionId) ?? []) wake()
      }
    })
    return () => {
      set.delete(onReject)
      if (set.size === 0) this.watchers.delete(sessionId)
      if (this.watchers.size === 0) {
        this.unsubscribe?.()
        this.unsubscribe = undefined
      }
    }
  }
}

const registries = new WeakMap<EventLog, RejectsBySession>()

function rejectsOf(log: EventLog): RejectsBySession {
  const registry = registries.get(log) ?? new RejectsBySession(log)
  registries.set(log, registry)
  return registry
}

/** A bound on the walk up a sub-agent chain (the configured nesting limit is far lower). */
const MAX_CHAIN = 16
