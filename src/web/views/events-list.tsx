import { Component, createRef } from 'preact'
import type { ChronicleSocket, EventFrame, HistoryEvent } from '../../client/index.js'
import type { LiveSession } from '../live-session.js'
import { atHash } from '../route.js'
import { clockTime, ErrorNote, formatCount } from '../ui.js'

/**
 * The raw log of a session: the newest page from `session.history`, older
 * pages on request, and the live events as they come (follow keeps the view
 * at the end). Rows have one height and only those in view (plus a margin)
 * are in the DOM, so 100,000 rows cost what 40 do.
 */

const ROW = 26
const OVERSCAN = 10
const PAGE = 1000

export interface Row {
  readonly seq: number
  readonly type: string
  readonly at: string
  readonly actor: string
  readonly data: unknown
  readonly meta: unknown
  readonly inherited?: boolean
}

export function rowOfHistory(e: HistoryEvent): Row {
  const meta = e.meta as { actor?: string; by?: { name: string } }
  return {
    seq: e.seq,
    type: e.type,
    at: e.at,
    actor: meta.by ? meta.by.name : (meta.actor ?? ''),
    data: e.data,
    meta: e.meta,
    ...(e.inherited && { inherited: true }),
  }
}

export function rowOfFrame(f: EventFrame): Row {
  const meta = (f.event.meta ?? {}) as { actor?: string; by?: { name: string } }
  return {
    seq: f.seq,
    type: f.event.type,
    at: f.event.at,
    actor: meta.by ? meta.by.name : (meta.actor ?? ''),
    data: f.event.data,
    meta: f.event.meta,
  }
}

interface Props {
  readonly socket: ChronicleSocket
  readonly live: LiveSession
  readonly revision: number
}

interface State {
  readonly rows: readonly Row[]
  readonly older: number | undefined
  readonly loading: boolean
  readonly error: unknown
  readonly follow: boolean
  readonly scrollTop: number
  readonly height: number
  readonly selected: number | undefined
}

export class EventsList extends Component<Props, State> {
  override state: State = {
    rows: [],
    older: undefined,
    loading: true,
    error: undefined,
    follow: true,
    scrollTop: 0,
    height: 480,
    selected: undefined,
  }
  private readonly box = createRef<HTMLElement>()
  /** how many of the live session's frames are in `rows` */
  private taken = 0
  private alive = true

  override componentDidMount(): void {
    void this.loadNewest()
    const el = this.box.current
    if (el) this.setState({ height: el.clientHeight })
  }

  override componentWillUnmount(): void {
    this.alive = false
  }

  override componentDidUpdate(previous: Props): void {
    if (previous.revision !== this.props.revision) this.takeLive()
    const el = this.box.current
    if (el && this.state.follow) {
      const bottom = el.scrollHeight - el.clientHeight
      if (Math.abs(el.scrollTop - bottom) > 1) el.scrollTop = bottom
    }
  }

  private async loadNewest(): Promise<void> {
    const { socket, live } = this.props
    try {
      const page = await socket.call('session.history', {
        session: live.id,
        before: Number.MAX_SAFE_INTEGER,
        limit: PAGE,
      })
      if (!this.alive) return
      this.setState({ rows: page.events.map(rowOfHistory), older: page.next, loading: false })
      this.takeLive()
    } catch (error) {
      if (this.alive) this.setState({ error, loading: false })
    }
  }

  private async loadOlder(): Promise<void> {
    const { older } = this.state
    if (older === undefined) return
    this.setState({ loading: true, follow: false })
    try {
      const page = await this.props.socket.call('session.history', {
        session: this.props.live.id,
        before: older,
        limit: PAGE,
      })
      if (!this.alive) return
      const el = this.box.current
      const added = page.events.length
      this.setState(
        (s) => ({ rows: [...page.events.map(rowOfHistory), ...s.rows], older: page.next, loading: false }),
        () => {
          if (el) el.scrollTop += added * ROW
        },
      )
    } catch (error) {
      if (this.alive) this.setState({ error, loading: false })
    }
  }

  /** Appends the live events the list does not hold yet. */
  private takeLive(): void {
    if (this.state.loading && this.state.rows.length === 0) return
    const frames = this.props.live.frames
    if (this.taken > frames.length) this.taken = 0
    if (this.taken === frames.length) return
    const last = this.state.rows[this.state.rows.length - 1]?.seq ?? 0
    const fresh = frames.slice(this.taken).filter((f) => f.seq > last)
    this.taken = frames.length
    if (fresh.length > 0) this.setState((s) => ({ rows: [...s.rows, ...fresh.map(rowOfFrame)] }))
  }

  private readonly onScroll = () => {
    const el = this.box.current
    if (!el) return
    const atEnd = el.scrollHeight - el.clientHeight - el.scrollTop < ROW
    this.setState({ scrollTop: el.scrollTop, height: el.clientHeight, follow: atEnd ? this.state.follow : false })
  }

  override render({ live }: Props, { rows, older, loading, error, follow, scrollTop, height, selected }: State) {
    const first = Math.max(0, Math.floor(scrollTop / ROW) - OVERSCAN)
    const last = Math.min(rows.length, Math.ceil((scrollTop + height) / ROW) + OVERSCAN)
    const picked = selected === undefined ? undefined : rows.find((r) => r.seq === selected)
    return (
      <section class="events" aria-labelledby="events-title">
        <div class="events-bar">
          <h2 id="events-title">Events</h2>
          <span>{formatCount(rows.length)} loaded</span>
          <button type="button" disabled={older === undefined || loading} onClick={() => void this.loadOlder()}>
            {older === undefined ? 'No older events' : `Load ${formatCount(PAGE)} older`}
          </button>
          <label class="inline">
            <input
              type="checkbox"
              checked={follow}
              onChange={(e) => {
                const on = e.currentTarget.checked
                this.setState({ follow: on })
              }}
            />
            Follow live events
          </label>
        </div>
        <ErrorNote error={error} />
        {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard to scroll it */}
        <section class="events-box" ref={this.box} onScroll={this.onScroll} tabIndex={0} aria-label="Event log">
          <ol class="events-rows" style={{ height: `${rows.length * ROW}px` }}>
            {rows.slice(first, last).map((r, i) => (
              <li
                key={r.seq}
                class={`event-row${r.seq === selected ? ' selected' : ''}${r.inherited ? ' inherited' : ''}`}
                style={{ top: `${(first + i) * ROW}px` }}
              >
                <button
                  type="button"
                  class="event-open"
                  aria-pressed={r.seq === selected}
                  onClick={() => this.setState({ selected: r.seq === selected ? undefined : r.seq })}
                >
                  <span class="seq">{r.seq}</span>
                  <span class="time">{clockTime(r.at)}</span>
                  <span class="type">{r.type}</span>
                  <span class="actor">{r.actor}</span>
                  <span class="summary">{summary(r.data)}</span>
                </button>
                <a class="event-at" href={atHash(live.id, r.seq)} aria-label={`The session at seq ${r.seq}`}>
                  at
                </a>
              </li>
            ))}
          </ol>
        </section>
        {picked && (
          <section class="event-detail" aria-label={`Event ${picked.seq}`}>
            <h3>
              Event {picked.seq}: {picked.type}
            </h3>
            <pre class="block">{JSON.stringify({ data: picked.data, meta: picked.meta, at: picked.at }, null, 2)}</pre>
          </section>
        )}
      </section>
    )
  }
}

function summary(data: unknown): string {
  const text = JSON.stringify(data) ?? ''
  return text.length > 160 ? `${text.slice(0, 157)}…` : text
}
