import type { StoredEvent } from '../../events/envelope.js'
import type { EventLog } from '../../events/log.js'
import type { Session } from '../../projections/fold/model.js'
import type { ReadModels } from '../../projections/read-models.js'

/**
 * Which sessions of a cluster this node runs (docs/CLUSTER.md "Commands at any node"). A client's command is
 * a fact in the log whichever node took it; starting the work it asks for is the business of the node that
 * holds the session, when it hears the command. So a wake here for a session another node holds starts
 * nothing. A session this node has just claimed is recovered first: its wakes wait until recovery has handed
 * its resumed run on (a wake before would start a second run over the open one), then go on.
 */
export class Placement {
  /** claimed sessions being recovered, each with whether a wake came meanwhile */
  private readonly recovering = new Map<string, boolean>()

  constructor(private readonly holds: (sessionId: string) => boolean) {}

  /** Whether a wake of the session may start work here now; one that must wait for its recovery is kept. */
  admit(sessionId: string): boolean {
    if (!this.holds(sessionId)) return false
    if (!this.recovering.has(sessionId)) return true
    this.recovering.set(sessionId, true)
    return false
  }

  /** Whether this node holds the session (its runs are this node's). */
  runsHere(sessionId: string): boolean {
    return this.holds(sessionId)
  }

  /** Wakes of `sessionIds` wait; the returned function ends that and gives the sessions woken meanwhile. */
  hold(sessionIds: readonly string[]): () => string[] {
    for (const id of sessionIds) this.recovering.set(id, false)
    return () => {
      const woken = sessionIds.filter((id) => this.recovering.get(id) === true)
      for (const id of sessionIds) this.recovering.delete(id)
      return woken
    }
  }
}

/** A client's command another node took that asks the session's run for work: input to answer, a compaction. */
export function asksForRun(e: StoredEvent): boolean {
  return (e.type === 'input.accepted' && !e.data.noReply) || e.type === 'compaction.requested'
}

/** The input a caller waits to see answered: its id, and where it was accepted. */
export interface AwaitedInput {
  readonly inputId: string
  readonly seq: number
}

/**
 * Resolves once another node's run has answered `input` (docs/CLUSTER.md): no run open and the input no
 * longer waiting — or a run cancelled after it was accepted, which leaves it parked. Without an input: no run
 * open and none waiting. Heard from the log's commits, which on a cluster include every node's; `signal`
 * gives up.
 */
export function runEndedElsewhere(
  ports: { readonly log: Pick<EventLog, 'onCommit'>; readonly readModels: Pick<ReadModels, 'session'> },
  sessionId: string,
  input?: AwaitedInput,
  signal?: AbortSignal,
): Promise<void> {
  return new Promise((resolve) => {
    let cancelled = false
    let reading = false
    let again = false
    const done = () => {
      unsubscribe()
      signal?.removeEventListener('abort', done)
      resolve()
    }
    const answered = (session: Session): boolean => {
      if (session.run) return false
      if (!input) return session.inbox.length === 0
      return cancelled || !session.inbox.some((i) => i.inputId === input.inputId)
    }
    const check = async (): Promise<void> => {
      if (reading) {
        again = true
        return
      }
      reading = true
      try {
        do {
          again = false
          const session = await ports.readModels.session(sessionId)
          if (!session || answered(session)) return done()
        } while (again)
      } catch {
        return done() // the store is away: the caller reads what stands
      } finally {
        reading = false
      }
    }
    const unsubscribe = ports.log.onCommit((events) => {
      let heard = false
      for (const e of events) {
        if (e.sessionId !== sessionId) continue
        heard = true
        if (e.type === 'run.finished' && e.data.outcome === 'cancelled' && e.seq > (input?.seq ?? 0)) cancelled = true
      }
      if (heard) void check()
    })
    signal?.addEventListener('abort', done, { once: true })
    void check()
  })
}
