import type { ChronicleEvent } from './catalogue.js'
import {
  failJoined,
  type Joinable,
  joinDelta,
  LOADED_SESSIONS,
  MERGE_FROM_QUEUED,
  type Settle,
  settleJoined,
} from './delta-merge.js'
import type { StoredEvent } from './envelope.js'
import { ChronicleError } from './errors.js'
import type { AppendOptions } from './store.js'

/**
 * When queued appends commit (docs/ARCHITECTURE.md "How an append flows"):
 * the store's batching, apart from the log it commits into. What is queued
 * in one turn commits in one transaction on the next; under load — many
 * sessions streaming — the queue waits out an interval, so each session's
 * deltas share commits (and, merged, events), while an append someone waits
 * on, or a read of its session, takes only its own session's with it.
 * A failing batch is retried one append at a time, so one bad append does
 * not sink the others.
 */

export type { Settle } from './delta-merge.js'

/** Commits appends in one transaction: each one's stored events, in order; throws (committing none) if one fails. */
export type CommitBatch = (batch: readonly PendingAppend[]) => StoredEvent[][]

/** A queued append; a lone delta may join it (src/events/delta-merge.ts). */
export interface PendingAppend extends Joinable {
  readonly sessionId: string
  /** the loaded round that commits it (enqueue only): appends queued during a round wait for the next */
  readonly round: number | undefined
}

/** Every pending append has one shape, all fields set: one hidden class for the code that reads them. */
const pending = (
  sessionId: string,
  events: ChronicleEvent[],
  options: AppendOptions,
  done: Settle,
  awaited: boolean,
  round: number | undefined,
): PendingAppend => ({ sessionId, events, options, done, awaited, round, merged: undefined })

/**
 * The shortest time between two batched commits under load. A commit costs
 * about the same whether it holds one delta of a session or several (each
 * session it touches costs a few pages of WAL), so once the commits of one
 * interval held MERGE_FROM_QUEUED appends or more from LOADED_SESSIONS sessions
 * or more (many sessions streaming), for
 * LOADED_FOR_MS the queue waits at least this long after each commit: each session's
 * deltas then share commits, frames and, merged, events. Otherwise the queue
 * commits on the next turn, so a lightly loaded server adds no wait to a
 * turn.
 */
const LOADED_COMMIT_INTERVAL_MS = 40
/**
 * ...and longer the more sessions the commits of the last second touched, up to
 * LOADED_MAX_INTERVAL_MS: every session a commit touches costs each of its
 * subscribers a frame and a socket write, so the writes per second grow with
 * the sessions streaming, not with the deltas. Measured (`npm run bench --
 * stream`, S = 200): 100 ms instead of 40 stores 0.27 events per delta instead
 * of 0.53 and spends about a third less CPU per delta, with the same
 * commit → receipt latency; a delta waits at most the interval longer.
 */
const LOADED_MS_PER_SESSION = 0.5
/** A time before every other (a double, as Date.now() is: see the store's fields). */
const NEVER = Number.NEGATIVE_INFINITY
const LOADED_MAX_INTERVAL_MS = 100
const ACTIVE_GENERATION_MS = 500
/**
 * How long an interval's MERGE_FROM_QUEUED appends from LOADED_SESSIONS sessions or more (src/events/delta-merge.ts)
 * keep the store loaded (small forced commits in between do not end it).
 */
const LOADED_FOR_MS = 1000
/**
 * A loaded round commits what was queued when it started in transactions of
 * at most this many appends, one per turn of the event loop. An event's
 * latency is its transaction's time plus its frames': one commit of every
 * streaming session (S = 400: some 700 events, 20–60 ms) held every frame
 * behind the last insert, and the socket writes behind the promise jobs the
 * whole batch set off. Each transaction costs little besides its rows.
 */
const LOADED_CHUNK = 128
/**
 * While the store is loaded and other sessions' appends wait in the queue (runs streaming, which will
 * settle too), commits hurried for fewer than LOADED_SESSIONS sessions come at most this often; the
 * sessions hurried meanwhile share the next. Runs settle at their start, at each step and at their end,
 * and each settle alone was a commit of its own few appends: `npm run bench -- stream`, S = 200, made 2.8
 * such commits a run against 0.1 for the loaded rounds that carry every delta. A wait of at most this is
 * small beside the interval it saves. A hurry of LOADED_SESSIONS sessions or more (producers each awaiting
 * its append), or one with nothing else queued (runs one after another: nothing to share a commit with),
 * commits on the next turn as before.
 */
const HURRY_EVERY_MS = 10

export class CommitScheduler {
  private queue: PendingAppend[] = []
  /** each session's last append in `queue`: where its next delta may merge */
  private lastQueued = new Map<string, PendingAppend>()
  /** a timer or immediate will flush: one at a time, whoever else flushes meanwhile */
  private flushScheduled = false
  /** the loaded interval's timer, while the next round waits for it */
  private roundTimer: NodeJS.Timeout | undefined = undefined
  /** sessions whose queued appends someone awaits: they commit on the next turn, not at the interval */
  private hurried = new Set<string>()
  private hurrying = false
  /** the hurried commit's timer, while it waits for HURRY_EVERY_MS since the last one */
  private hurryTimer: NodeJS.Timeout | undefined = undefined
  /*
   * The times below start at NEVER, not 0. A field that holds a small integer
   * until its first Date.now() changes the scheduler's hidden class then, and
   * V8 throws away every method of it that it has compiled (traced with
   * --trace-deopt: flushSession and more, at the first loaded round of `npm run
   * bench -- stream`, when these fields were the store's). For the same reason
   * the loaded interval is a whole number of milliseconds.
   */
  /** the loaded round the next enqueued append belongs to, and when the last one started */
  private round = 0
  private roundAt = NEVER
  private hurriedAt = NEVER
  private flushedAt = NEVER
  /**
   * Appends committed since `windowAt`, counted per LOADED_COMMIT_INTERVAL_MS:
   * the load is a rate, not one commit's size. A store committing every turn
   * never holds MERGE_FROM_QUEUED in one commit, however many sessions stream.
   */
  private windowAt = NEVER
  private windowAppends = 0
  private windowSessions = new Set<string>()
  /** until when the store counts as loaded: a second after an interval's commits held MERGE_FROM_QUEUED appends */
  private loadedUntil = NEVER
  /** the wait between loaded commits, set from the sessions the last interval touched */
  private loadedInterval = LOADED_COMMIT_INTERVAL_MS
  /**
   * The sessions committed in this half-second (and how many in the last):
   * the sessions streaming, which set the loaded interval. Counted per
   * half-second, not per interval: a commit forced between two loaded ones
   * (an input, a command) holds a fraction of them.
   */
  private activeSessions = new Set<string>()
  private activeBefore = 0
  private activeAt = NEVER

  constructor(
    private readonly commit: CommitBatch,
    private readonly closed: () => boolean,
  ) {}

  /** Queues an append that commits now, behind everything queued (its session's only, `alone` under load). */
  commitNow(sessionId: string, events: ChronicleEvent[], options: AppendOptions, done: Settle): void {
    this.queue.push(pending(sessionId, events, options, done, true, undefined))
    if (options.alone && this.loaded()) this.flushSession(sessionId)
    else this.flush()
  }

  /**
   * Someone waits on the session's queued appends (an enqueue's promise):
   * while the store is loaded they commit on the next turn (or, while other
   * sessions' appends are queued, up to HURRY_EVERY_MS after the last hurried
   * commit), with those of every other session hurried meanwhile, instead of
   * waiting out the interval; the other sessions' keep it. The interval is for
   * appends nobody waits on — streamed deltas — which then share commits; one
   * a caller awaits would otherwise wait it out, and producers that await each
   * append would commit once an interval (bench store: 1,263 events/s). Taking
   * every session's with them would cut the streaming sessions' sharing short.
   */
  hurry(sessionId: string): void {
    if (this.roundTimer === undefined) return // not waiting on an interval: the next turn commits it anyway
    this.hurried.add(sessionId)
    if (!this.hurrying) {
      this.hurrying = true
      // only other sessions' queued appends (runs streaming, which will settle too) give it a commit to share
      const wait = this.lastQueued.size > this.hurried.size ? this.hurriedAt + HURRY_EVERY_MS - Date.now() : 0
      if (wait > 0) this.hurryTimer = setTimeout(this.flushHurried, wait)
      else setImmediate(this.flushHurried)
    } else if (this.hurryTimer !== undefined && this.hurried.size >= LOADED_SESSIONS) {
      // enough sessions wait to make the commit worth its cost now
      clearTimeout(this.hurryTimer)
      this.hurryTimer = undefined
      setImmediate(this.flushHurried)
    }
  }

  private readonly flushHurried = (): void => {
    this.hurrying = false
    this.hurryTimer = undefined
    const sessions = this.hurried
    this.hurried = new Set()
    if (this.closed()) return
    const batch: PendingAppend[] = []
    const rest: PendingAppend[] = []
    for (const item of this.queue) (sessions.has(item.sessionId) ? batch : rest).push(item)
    if (batch.length === 0) return
    this.hurriedAt = Date.now()
    this.queue = rest
    for (const sessionId of sessions) this.lastQueued.delete(sessionId)
    this.commitQueued(batch)
  }

  /**
   * Queues validated events; `done` hears when they commit or fail.
   * `awaited`: an enqueue, whose caller waits on it: it commits on the next turn, as it came (nothing merges
   * into it or with it).
   */
  add(sessionId: string, events: ChronicleEvent[], options: AppendOptions, done: Settle, awaited: boolean): void {
    const last = this.lastQueued.get(sessionId)
    // Deltas merge only into a long queue (a server behind) or while the store is loaded (it waits for the
    // interval anyway): a server keeping up stores every delta as the model sent it.
    if (
      last &&
      (this.queue.length >= MERGE_FROM_QUEUED || this.loaded()) &&
      joinDelta(last, events, options, done, awaited)
    )
      return
    const item = pending(sessionId, events, options, done, awaited, this.round)
    this.queue.push(item)
    this.lastQueued.set(sessionId, item)
    if (!this.flushScheduled) this.scheduleFlush()
  }

  /** The next turn, or under load the loaded interval after the last round started. */
  private scheduleFlush(): void {
    this.flushScheduled = true
    const now = Date.now()
    const wait = now < this.loadedUntil ? this.roundAt + this.loadedInterval - now : 0
    if (wait > 0) this.roundTimer = setTimeout(this.startRound, wait)
    else setImmediate(this.startRound)
  }

  private readonly startRound = (): void => {
    this.roundTimer = undefined
    this.roundAt = Date.now()
    if (!this.loaded()) {
      this.flushScheduled = false
      this.flush()
      return
    }
    this.flushRound(this.round++)
  }

  /**
   * Commits the round's first LOADED_CHUNK queued appends (a prefix of the
   * queue, so what was appended first commits first), and the rest of the
   * round on the next turn.
   */
  private flushRound(round: number): void {
    if (this.closed()) return
    let n = 0
    while (n < this.queue.length && n < LOADED_CHUNK && (this.queue[n]?.round ?? round) <= round) n++
    if (n > 0) {
      const batch = this.queue.splice(0, n)
      for (const item of batch) if (this.lastQueued.get(item.sessionId) === item) this.lastQueued.delete(item.sessionId)
      this.commitQueued(batch)
    }
    const next = this.queue[0]
    if (next && (next.round ?? round) <= round) setImmediate(() => this.flushRound(round))
    else if (next) this.scheduleFlush()
    else this.flushScheduled = false
  }

  /**
   * Someone waits on the session's queued appends (a run settling what it
   * recorded): under load they commit on the next turn, with every other
   * session's hurried in this turn, rather than at the loaded interval;
   * otherwise the next turn commits them anyway. Not now, alone: twelve runs
   * settling in one turn then cost twelve commits instead of one, and a
   * commit's cost is mostly per commit (`npm run test:soak`: seven commits a
   * turn, each 0.25–1 ms).
   */
  awaited(sessionId: string): void {
    if (this.loaded()) this.hurry(sessionId)
  }

  /**
   * Commits the session's queued appends, if it has any: what a reader of that
   * session's state needs. Under load only those (flushSession); otherwise
   * everything queued, as the next turn would.
   */
  flushFor(sessionId: string): void {
    if (!this.lastQueued.has(sessionId)) return
    if (this.loaded()) this.flushSession(sessionId)
    else this.flush()
  }

  /** Commits everything queued. */
  flush(): void {
    if (this.queue.length === 0) return
    const batch = this.queue
    this.queue = []
    this.lastQueued = new Map()
    this.commitQueued(batch)
  }

  /**
   * Under load, an append that must commit now and refers to no other session
   * (`alone`: an accepted input), or a reader of one session (flushFor), takes
   * only that session's queued appends with it; the other
   * sessions' wait for the loaded interval. Taking them all made each input
   * cost a commit, an fsync and frames for every session streaming, so a
   * burst of inputs cut every session's merges short and slowed itself down
   * (`npm run bench -- stream`: runs that should start within a second
   * started over ten). Their seqs follow this commit's; each session's own
   * order is kept.
   */
  flushSession(sessionId: string): void {
    const batch: PendingAppend[] = []
    const rest: PendingAppend[] = []
    for (const item of this.queue) (item.sessionId === sessionId ? batch : rest).push(item)
    if (batch.length === 0) return
    this.queue = rest
    this.lastQueued.delete(sessionId)
    this.commitQueued(batch)
  }

  /** the last flush fell in the loaded regime: the queue waits for the loaded interval */
  loaded(): boolean {
    return this.flushedAt < this.loadedUntil
  }

  private commitQueued(batch: PendingAppend[]): void {
    if (this.closed()) throw closedError()
    this.flushedAt = Date.now()
    if (this.flushedAt - this.windowAt >= LOADED_COMMIT_INTERVAL_MS) {
      this.windowAt = this.flushedAt
      this.windowAppends = 0
      this.windowSessions.clear()
    }
    this.windowAppends += batch.length
    if (this.flushedAt - this.activeAt >= ACTIVE_GENERATION_MS) {
      this.activeBefore = this.activeSessions.size
      this.activeSessions.clear()
      this.activeAt = this.flushedAt
    }
    for (const item of batch) {
      this.windowSessions.add(item.sessionId)
      this.activeSessions.add(item.sessionId)
    }
    if (this.windowAppends >= MERGE_FROM_QUEUED && this.windowSessions.size >= LOADED_SESSIONS) {
      this.loadedUntil = this.flushedAt + LOADED_FOR_MS
      const streaming = Math.max(this.activeBefore, this.activeSessions.size)
      this.loadedInterval = Math.min(
        LOADED_MAX_INTERVAL_MS,
        Math.max(LOADED_COMMIT_INTERVAL_MS, Math.round(streaming * LOADED_MS_PER_SESSION)), // whole ms: see the fields
      )
    }
    let committed: StoredEvent[][]
    try {
      committed = this.commit(batch)
    } catch {
      // One bad append must not sink the others: retry each alone.
      for (const item of batch) {
        try {
          const [stored] = this.commit([item])
          settleJoined(item, stored ?? [])
        } catch (err) {
          failJoined(item, err)
        }
      }
      return
    }
    batch.forEach((item, i) => {
      settleJoined(item, committed[i] ?? [])
    })
  }
}

export function closedError(): ChronicleError {
  return new ChronicleError('INTERNAL', 'the event store is closed')
}
