import type { ChronicleSocket, EventFrame, StateView, Subscription } from '../client/index.js'
import { SessionModel } from './session-model.js'

/** Live events kept for the events list (older ones are read back from the log by page). */
const KEEP_FRAMES = 20_000

/**
 * One session, live: its state now (`session.state`; at a cold open, the
 * one start.ts read ahead over HTTP), then a subscription from that seq,
 * each event folded into the model. The page never replays the history
 * into the DOM: a 10,000-event session opens with one state
 * read. The SDK re-subscribes from the last delivered seq after a dropped
 * connection, and the model ignores anything at or below its seq, so a
 * reconnect neither loses nor repeats a part.
 */
export class LiveSession {
  model: SessionModel | undefined
  /** the live events since the page opened the session, oldest first */
  readonly frames: EventFrame[] = []
  error: unknown
  private sub: Subscription | undefined
  private closed = false
  private readonly listeners = new Set<(frame?: EventFrame) => void>()

  constructor(
    private readonly socket: ChronicleSocket,
    readonly id: string,
    /** the state read ahead of the page (start.ts): the first state, unless it failed */
    private first?: Promise<StateView> | undefined,
  ) {}

  async open(): Promise<void> {
    try {
      await this.load()
    } catch (err) {
      this.error = err
      this.notify()
    }
  }

  /** Called with each folded event (and with none after a reload). */
  onChange(listener: (frame?: EventFrame) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  close(): void {
    this.closed = true
    void this.sub?.close()
    this.listeners.clear()
  }

  private async load(): Promise<void> {
    const ahead = this.first
    this.first = undefined
    const state =
      (await ahead?.catch(() => undefined)) ?? (await this.socket.call('session.state', { session: this.id }))
    if (this.closed) return
    const previous = this.sub
    this.model = SessionModel.from(state)
    this.error = undefined
    // drawn now, not after the subscription's answer (a round trip of a cold open): the subscription starts at the
    // state's seq, and what it delivers folds into this model as it comes, so nothing is missed or shown twice
    this.notify()
    const sub = await this.socket.subscribe({ sessions: [this.id], after: state.seq }, (f) => this.onEvent(f))
    this.sub = sub
    void previous?.close()
    if (this.closed) void sub.close()
  }

  private onEvent(frame: EventFrame): void {
    if (this.closed || !this.model) return
    if (frame.seq <= this.model.seq) return
    this.frames.push(frame)
    if (this.frames.length > KEEP_FRAMES) this.frames.splice(0, this.frames.length - KEEP_FRAMES)
    try {
      this.model.apply(frame)
    } catch (err) {
      // the event does not fit the model (it should always): read the state again rather than show a wrong one
      console.warn('chronicle: reloading the session after', err)
      void this.load().catch((e: unknown) => {
        this.error = e
        this.notify()
      })
      return
    }
    this.notify(frame)
  }

  private notify(frame?: EventFrame): void {
    for (const l of this.listeners) l(frame)
  }
}
