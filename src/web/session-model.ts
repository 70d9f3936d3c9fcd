import type { EventFrame, Message, Part, Session, StateView } from '../client/index.js'
import type { StoredEvent } from '../events/envelope.js'
import { apply, evolve } from '../projections/fold/evolve.js'
import type { SessionView } from '../projections/fold/model.js'

/**
 * A session as the page shows it: the state `session.state` answered, then
 * every later event of the session folded in with the server's own `evolve`
 * (src/projections/fold/evolve.ts) — the same fold, so the page cannot drift from
 * the read model. Applying is idempotent: an event at or below the seq the
 * model is at changes nothing, so a resumed subscription that repeats an
 * event (or a reload that overlaps live events) never shows a part twice.
 *
 * evolve returns new objects for what an event changes and keeps the others,
 * so a view can skip re-rendering a part or message whose object is the same.
 */
export class SessionModel {
  /** the seq of the last event folded in */
  seq: number
  /** bumped on every change: what a render compares */
  revision = 0
  private readonly view: SessionView
  /** each message's part ids in the order they appeared */
  private readonly order = new Map<string, string[]>()

  private constructor(state: StateView) {
    this.seq = state.seq
    this.view = { session: state.session as Session, messages: new Map(), parts: new Map() }
    for (const m of state.messages) this.view.messages.set(m.id, m)
    for (const p of state.parts) this.addPart(p)
  }

  static from(state: StateView): SessionModel {
    return new SessionModel(state)
  }

  get session(): Session {
    return this.view.session as Session
  }

  /**
   * Folds one event in. False when it is at or below the model's seq (already
   * folded) or belongs to another session; throws when evolve finds the event
   * does not fit (the caller reloads the state then).
   */
  apply(frame: EventFrame): boolean {
    if (frame.seq <= this.seq || frame.session !== this.session.id) return false
    const event = {
      seq: frame.seq,
      sessionId: frame.session,
      version: frame.version,
      schemaVersion: 1,
      type: frame.event.type,
      data: frame.event.data,
      meta: frame.event.meta ?? { actor: 'system' },
      at: frame.event.at,
    } as unknown as StoredEvent
    const changes = evolve(this.view, event)
    for (const p of changes.parts ?? []) if (!this.view.parts.has(p.id)) this.addPart(p, false)
    apply(this.view, changes)
    this.seq = frame.seq
    this.revision++
    return true
  }

  messages(): Message[] {
    return [...this.view.messages.values()]
  }

  get messageCount(): number {
    return this.view.messages.size
  }

  partsOf(messageId: string): Part[] {
    const ids = this.order.get(messageId) ?? []
    return ids.map((id) => this.view.parts.get(id)).filter((p): p is Part => p !== undefined)
  }

  part(id: string): Part | undefined {
    return this.view.parts.get(id)
  }

  /** every part, in the order the model met them */
  parts(): Part[] {
    return [...this.view.parts.values()]
  }

  private addPart(p: Part, set = true): void {
    if (set) this.view.parts.set(p.id, p)
    const ids = this.order.get(p.messageId)
    if (ids) ids.push(p.id)
    else this.order.set(p.messageId, [p.id])
  }
}
