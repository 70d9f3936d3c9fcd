import type { RunOutcome } from '../../events/catalogue.js'
import { CANCELLED, SHUTDOWN } from '../abort-reasons.js'

/**
 * The run coordinator: at most one run per session, sessions concurrent.
 * A wake-up while a session runs is not a second run: the run picks new
 * steering input up at its next step, and whatever is still pending when it
 * ends starts one follow-up run. Cancel aborts the running run; stop aborts
 * every run for shutdown and waits for them to reach a safe point.
 */

/** `resume` is set for a run recovery continues after a restart (same runId). */
export type RunFn = (sessionId: string, signal: AbortSignal, resume?: ResumedRun) => Promise<RunOutcome | 'shutdown'>

export interface ResumedRun {
  readonly runId: string
}

interface Active {
  controller: AbortController
  /** woken after a cancel: pending input may run again */
  wokenAfterCancel: boolean
  /** wakes while it was active: one during a read of what is pending may be for input that read missed */
  wakes: number
  /** (cluster) let go of: its run is stopping, and what starts next for the session waits for it to end */
  released: boolean
  readonly done: Promise<void>
}

export class RunCoordinator {
  private readonly active = new Map<string, Active>()
  private stopping = false

  constructor(
    private readonly run: RunFn,
    /** the first pending inbox entry, if any (read from the session) */
    private readonly pending: (sessionId: string) => Promise<string | undefined>,
    private readonly onError: (sessionId: string, err: unknown) => void = () => {},
  ) {}

  wake(sessionId: string): void {
    if (this.stopping) return
    const entry = this.active.get(sessionId)
    if (entry && !entry.released) {
      entry.wokenAfterCancel = true
      entry.wakes++
      return
    }
    // whether anything is pending is read by the drain: a session with nothing leaves it at once
    const controller = new AbortController()
    const created: Active = { controller, wokenAfterCancel: false, wakes: 0, released: false, done: Promise.resolve() }
    this.active.set(sessionId, created)
    Object.assign(created, { done: this.drain(sessionId, created, undefined, after(entry, Promise.resolve(true))) })
  }

  /**
   * Continues a run that recovery marked `run.resumed`, even with nothing pending; then like wake. The session
   * is held from this call, though the run starts only once `start` resolves true (false: it never does): a
   * cancel meanwhile aborts it, and a wake joins it rather than starting a second run over the open one.
   */
  resume(sessionId: string, run: ResumedRun, start: Promise<boolean> = Promise.resolve(true)): void {
    const entry = this.active.get(sessionId)
    if (this.stopping || (entry && !entry.released)) return
    const created: Active = {
      controller: new AbortController(),
      wokenAfterCancel: false,
      wakes: 0,
      released: false,
      done: Promise.resolve(),
    }
    this.active.set(sessionId, created)
    Object.assign(created, { done: this.drain(sessionId, created, run, after(entry, start)) })
  }

  private async drain(sessionId: string, entry: Active, resume?: ResumedRun, start?: Promise<boolean>): Promise<void> {
    try {
      if (start && !(await start)) return
      // Start on a later turn: submit returns first, and inputs sent together start one run.
      await new Promise((resolve) => setImmediate(resolve))
      // each read is a read of the session: one a run. A resumed run was not started for what is pending: input
      // queued behind it (or left by its reject) must start a run after it, though that run left it where it was
      let head = resume ? undefined : await this.pendingNow(sessionId, entry)
      for (;;) {
        if (this.stopping || (head === undefined && !resume)) return
        const outcome = await this.run(sessionId, entry.controller.signal, resume)
        resume = undefined
        if (outcome === 'shutdown') return
        if (outcome === 'cancelled') {
          if (!entry.wokenAfterCancel) return // parked input waits for the next wake
          entry.controller = new AbortController()
          entry.wokenAfterCancel = false
        }
        const next = await this.pendingNow(sessionId, entry)
        if (next === head) return // nothing was delivered: never spin
        head = next
      }
    } catch (err) {
      this.onError(sessionId, err)
    } finally {
      // a run that was let go of ends after the session's next one began here (it was claimed back)
      if (this.active.get(sessionId) === entry) this.active.delete(sessionId)
    }
  }

  /**
   * What is pending, read again while wakes come during the read: a wake for input that committed after the
   * read began would otherwise be lost (it finds this drain active, and the drain ends on what it read).
   */
  private async pendingNow(sessionId: string, entry: Active): Promise<string | undefined> {
    for (;;) {
      const wakes = entry.wakes
      const head = await this.pending(sessionId)
      if (entry.wakes === wakes) return head
    }
  }

  isRunning(sessionId: string): boolean {
    return this.active.has(sessionId)
  }

  /** Aborts the session's run (its loop ends it `cancelled`). False when none runs here. */
  cancel(sessionId: string): boolean {
    const entry = this.active.get(sessionId)
    if (!entry) return false
    entry.wokenAfterCancel = false
    entry.controller.abort(CANCELLED)
    return true
  }

  /**
   * (cluster) The session is another node's now: its run stops where it is, as at a shutdown (left open for
   * the new owner's recovery), and nothing starts here until this node holds it again.
   */
  release(sessionId: string): Promise<void> {
    const entry = this.active.get(sessionId)
    if (!entry) return Promise.resolve()
    entry.wokenAfterCancel = false
    entry.released = true
    entry.controller.abort(SHUTDOWN)
    return entry.done
  }

  /** Resolves when the session has no run and nothing that would start one. */
  async idle(sessionId: string): Promise<void> {
    for (let entry = this.active.get(sessionId); entry; entry = this.active.get(sessionId)) await entry.done
  }

  async stop(): Promise<void> {
    this.stopping = true
    for (const entry of this.active.values()) entry.controller.abort(SHUTDOWN)
    await Promise.all([...this.active.values()].map((e) => e.done))
  }
}

/**
 * When a session's next run may start: once `start` says so and, if this node let its last run go (a lapsed
 * lease) and now holds the session again, once that run has stopped — never two runs of one session here.
 */
function after(released: Active | undefined, start: Promise<boolean>): Promise<boolean> {
  return released ? released.done.then(() => start) : start
}
