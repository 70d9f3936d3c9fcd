import { Component } from 'preact'
import { ApiError, type ChronicleSocket, type DiffView as Diff, type StateView } from '../../client/index.js'
import type { LiveSession } from '../live-session.js'
import { atHash, sessionHash } from '../route.js'
import { SessionModel } from '../session-model.js'
import type { StepIndexLoader } from '../step-index.js'
import { ErrorNote, plural } from '../ui.js'
import { ContextView } from './context-view.js'
import { DiffView } from './diff-view.js'
import type { PartActions } from './part-view.js'
import { RevertPanel } from './revert-panel.js'
import { Transcript } from './transcript.js'

/**
 * The timeline scrubber (`#/s/<id>@<seq>`): a range over the session's seqs.
 * Releasing it asks `session.state {at}` — the state right after that event,
 * folded by the server from its nearest snapshot — and draws it, and the URL
 * follows. A seq that is not an event of this session (outside its range, or
 * another session's) moves to the nearest one that is, with a notice. From
 * the seq shown: what the model saw at the step there, fork here, the diff
 * from here to now, and revert the files to here.
 *
 * `performance.measure('chronicle:scrub')` times each release to the painted
 * state; `chronicle:scrub-state` to the state's arrival and `chronicle:scrub-dom`
 * to the DOM holding it (bench/web.ts reads them).
 */

/** the latest messages a release of the scrubber fetches: the end of a long state, not all of it */
const SCRUB_WINDOW = 10

interface Props {
  readonly socket: ChronicleSocket
  readonly live: LiveSession
  readonly revision: number
  readonly id: string
  /** the seq the URL asks for; null: the latest */
  readonly seq: number | null
  readonly steps: StepIndexLoader
  /** changes when the step index does */
  readonly stepsRevision: number
  readonly navigate: (hash: string) => void
}

type Panel = 'none' | 'context' | 'diff' | 'revert'

interface State {
  readonly first: number | undefined
  /** the state drawn: its latest messages (`messageCount` in all; earlier ones fetched on request) */
  readonly shown: { readonly seq: number; readonly model: SessionModel; readonly messageCount: number } | undefined
  /** the slider's value while it moves */
  readonly pending: number | undefined
  readonly loading: boolean
  readonly notice: string | undefined
  readonly error: unknown
  readonly panel: Panel
  readonly diff: { readonly from: number; readonly to: number; readonly result: Diff } | undefined
  readonly actionError: unknown
  readonly busy: boolean
  readonly contextSeq: number | null | undefined
}

export class TimeTravel extends Component<Props, State> {
  override state: State = {
    first: undefined,
    shown: undefined,
    pending: undefined,
    loading: true,
    notice: undefined,
    error: undefined,
    panel: 'none',
    diff: undefined,
    actionError: undefined,
    busy: false,
    contextSeq: undefined,
  }
  private request = 0
  private measuring: string | undefined
  /** the seq the address is to show once the state is drawn */
  private urlSeq: number | undefined
  private alive = true
  private readonly actions: PartActions = {
    onContext: (partId) => void this.openStepContext(partId),
    onDiff: (messageId) => void this.messageDiff(messageId),
  }

  override async componentDidMount(): Promise<void> {
    try {
      const page = await this.props.socket.call('session.history', { session: this.props.id, after: 0, limit: 1 })
      if (!this.alive) return
      this.setState({ first: page.events[0]?.seq ?? 1 })
    } catch (error) {
      if (this.alive) this.setState({ error, loading: false })
      return
    }
    await this.go(this.props.seq, 0)
  }

  override componentWillUnmount(): void {
    this.alive = false
  }

  override componentDidUpdate(previous: Props, previousState: State): void {
    if (previous.seq !== this.props.seq && this.props.seq !== this.state.shown?.seq) void this.go(this.props.seq, 0)
    if (this.measuring && previousState.shown !== this.state.shown) {
      // to the frame that shows it: after style, layout and paint
      const mark = this.measuring
      this.measuring = undefined
      performance.measure('chronicle:scrub-dom', mark)
      requestAnimationFrame(() => setTimeout(() => performance.measure('chronicle:scrub', mark)))
    }
    if (this.urlSeq !== undefined) {
      // the address follows, once the state is drawn (replaceState can take tens of ms: never before the draw)
      const hash = atHash(this.props.id, this.urlSeq)
      this.urlSeq = undefined
      setTimeout(() => {
        if (this.alive && location.hash !== hash) history.replaceState(null, '', hash)
      }, 50)
    }
  }

  private get head(): number | undefined {
    return this.props.live.model?.session.lastSeq
  }

  /** Shows the state at `target` (null: the head), or at the nearest seq of the session in `direction`. */
  private async go(target: number | null, direction: -1 | 0 | 1): Promise<void> {
    const { socket, id } = this.props
    const token = ++this.request
    const mark = `chronicle:scrub-start:${token}`
    performance.mark(mark)
    this.measuring = undefined
    this.setState({ loading: true, error: undefined })
    try {
      const head = this.head ?? (await socket.call('session.get', { session: id })).session.lastSeq
      const first = this.state.first ?? 1
      let seq = target ?? head
      let notice: string | undefined
      if (seq > head || seq < first) {
        const clamped = Math.min(head, Math.max(first, seq))
        notice = `Seq ${seq} is outside this session's history (${first}–${head}): showing seq ${clamped}, the nearest.`
        seq = clamped
      }
      let state: StateView
      try {
        state = await socket.call('session.state', { session: id, at: seq, last: SCRUB_WINDOW })
      } catch (err) {
        if (!(err instanceof ApiError) || err.code !== 'SEQ_OUT_OF_RANGE') throw err
        const near = await this.nearest(seq, direction)
        if (near === undefined) throw err
        notice = `Seq ${seq} is not an event of this session: showing seq ${near}, the nearest.`
        state = await socket.call('session.state', { session: id, at: near, last: SCRUB_WINDOW })
      }
      if (token !== this.request || !this.alive) return
      performance.measure('chronicle:scrub-state', mark)
      this.measuring = mark
      const model = SessionModel.from(state)
      this.setState({
        shown: { seq: state.seq, model, messageCount: state.messageCount ?? state.messages.length },
        pending: state.seq,
        loading: false,
        notice,
        diff: undefined,
        actionError: undefined,
      })
      this.urlSeq = state.seq
    } catch (error) {
      if (token === this.request && this.alive) this.setState({ error, loading: false })
    }
  }

  /** More of the shown state's earlier messages: the same seq, a larger window. */
  private async earlier(): Promise<void> {
    const { shown } = this.state
    if (!shown) return
    const last = shown.model.messages().length + SCRUB_WINDOW * 3
    try {
      const state = await this.props.socket.call('session.state', { session: this.props.id, at: shown.seq, last })
      if (!this.alive || this.state.shown?.seq !== shown.seq) return
      this.setState({
        shown: {
          seq: state.seq,
          model: SessionModel.from(state),
          messageCount: state.messageCount ?? state.messages.length,
        },
      })
    } catch (actionError) {
      if (this.alive) this.setState({ actionError })
    }
  }

  /** The session's nearest event to a seq that is not one of its own: after it, before it, or the closer. */
  private async nearest(seq: number, direction: -1 | 0 | 1): Promise<number | undefined> {
    const { socket, id } = this.props
    const [next, prev] = await Promise.all([
      direction < 0
        ? undefined
        : socket.call('session.history', { session: id, after: seq, limit: 1 }).then((p) => p.events[0]?.seq),
      direction > 0
        ? undefined
        : socket.call('session.history', { session: id, before: seq, limit: 1 }).then((p) => p.events[0]?.seq),
    ])
    if (direction > 0) return next ?? (await this.nearest(seq, -1))
    if (direction < 0) return prev ?? (await this.nearest(seq, 1))
    if (next === undefined) return prev
    if (prev === undefined) return next
    return next - seq < seq - prev ? next : prev
  }

  private release(value: number): void {
    const current = this.state.shown?.seq ?? value
    void this.go(value, value > current ? 1 : value < current ? -1 : 0)
  }

  /** "What the model saw" for a step-start part of the transcript shown. */
  private async openStepContext(partId: string): Promise<void> {
    this.setState({ panel: 'context', contextSeq: undefined })
    try {
      const index = await this.props.steps.ensure()
      if (this.alive) this.setState({ contextSeq: index.stepOfPart(partId)?.seq ?? null })
    } catch (actionError) {
      if (this.alive) this.setState({ actionError })
    }
  }

  private async messageDiff(messageId: string): Promise<void> {
    const index = await this.props.steps.ensure()
    const range = index.messageDiffRange(messageId)
    if (!range) {
      this.setState({ panel: 'diff', actionError: new Error('no recorded workspace change for this message') })
      return
    }
    await this.showDiff(range.from, range.to)
  }

  private async showDiff(from: number, to: number): Promise<void> {
    this.setState({ busy: true, actionError: undefined, panel: 'diff' })
    try {
      const result = await this.props.socket.call('session.diff', { session: this.props.id, from, to })
      if (this.alive) this.setState({ diff: { from, to, result }, busy: false })
    } catch (actionError) {
      if (this.alive) this.setState({ actionError, busy: false })
    }
  }

  private async fork(): Promise<void> {
    const seq = this.state.shown?.seq
    if (seq === undefined) return
    this.setState({ busy: true, actionError: undefined })
    try {
      const { session } = await this.props.socket.call('session.fork', { session: this.props.id, at: seq })
      this.props.navigate(sessionHash(session.id))
    } catch (actionError) {
      if (this.alive) this.setState({ actionError, busy: false })
    }
  }

  override render(
    { socket, id, steps, live }: Props,
    { first, shown, pending, loading, notice, error, panel, diff, actionError, busy, contextSeq }: State,
  ) {
    const head = this.head
    const seq = shown?.seq
    const inherited = shown && shown.model.session.id !== id ? shown.model.session.id : undefined
    const stepSeq =
      contextSeq !== undefined ? contextSeq : seq !== undefined ? steps.index?.stepAtOrBefore(seq)?.seq : undefined
    return (
      <div class="time-travel">
        <section class="scrubber" aria-labelledby="scrubber-title">
          <h2 id="scrubber-title">Time travel</h2>
          {first !== undefined && head !== undefined && (
            <div class="scrubber-row">
              <label for="scrubber-range">Event seq</label>
              <input
                id="scrubber-range"
                type="range"
                min={first}
                max={head}
                step={1}
                value={pending ?? seq ?? head}
                aria-valuetext={`seq ${pending ?? seq ?? head} of ${first} to ${head}`}
                onInput={(e) => this.setState({ pending: Number(e.currentTarget.value) })}
                onChange={(e) => this.release(Number(e.currentTarget.value))}
              />
              <output for="scrubber-range" class="seq-now">
                {pending ?? seq ?? head}
              </output>
              <span class="range-ends">
                {first}–{head}
              </span>
            </div>
          )}
          <form
            class="scrubber-row"
            onSubmit={(e) => {
              e.preventDefault()
              const input = e.currentTarget.elements.namedItem('seq') as HTMLInputElement | null
              const value = Number(input?.value)
              if (Number.isInteger(value) && value >= 0) void this.go(value, 0)
            }}
          >
            <button
              type="button"
              disabled={seq === undefined || loading}
              onClick={() => seq !== undefined && void this.go(seq - 1, -1)}
            >
              ◀ Previous event
            </button>
            <button
              type="button"
              disabled={seq === undefined || loading}
              onClick={() => seq !== undefined && void this.go(seq + 1, 1)}
            >
              Next event ▶
            </button>
            <label for="seq-input">Go to seq</label>
            <input id="seq-input" name="seq" type="number" min={0} inputMode="numeric" class="seq-input" />
            <button type="submit">Go</button>
            <a href={sessionHash(id)} class="button">
              Back to live
            </a>
          </form>
          <p class="status-line" role="status" aria-live="polite">
            {loading ? 'Loading the state…' : seq !== undefined ? `Showing the session right after seq ${seq}.` : ''}
          </p>
          {notice && (
            <p class="notice" role="alert">
              {notice}
            </p>
          )}
          <ErrorNote error={error} />
        </section>

        {shown && (
          <div class="at-state">
            <section class="at-actions" aria-label="At this seq">
              <p>
                At seq {shown.seq}: {shown.model.session.status}, {plural(shown.model.messageCount, 'message')}
                {inherited && (
                  <>
                    {' '}
                    — inherited from <a href={sessionHash(inherited)}>{inherited}</a> (before the fork)
                  </>
                )}
              </p>
              <div class="actions">
                <button
                  type="button"
                  aria-expanded={panel === 'context'}
                  onClick={() => {
                    void steps.ensure()
                    this.setState({ panel: panel === 'context' ? 'none' : 'context', contextSeq: undefined })
                  }}
                >
                  What the model saw
                </button>
                <button type="button" class="primary" disabled={busy} onClick={() => void this.fork()}>
                  Fork here
                </button>
                <button
                  type="button"
                  disabled={busy || head === undefined}
                  onClick={() => head !== undefined && void this.showDiff(shown.seq, head)}
                >
                  Diff from here to now
                </button>
                <button
                  type="button"
                  aria-expanded={panel === 'revert'}
                  onClick={() => this.setState({ panel: panel === 'revert' ? 'none' : 'revert' })}
                >
                  Revert files to here…
                </button>
              </div>
              <ErrorNote error={actionError} />
            </section>

            {panel === 'context' && (
              <section class="panel" aria-label="What the model saw">
                <h3>What the model saw</h3>
                {stepSeq === undefined ? (
                  steps.index ? (
                    <p class="empty">No model step started at or before seq {shown.seq}.</p>
                  ) : (
                    <p aria-busy="true">Finding the steps…</p>
                  )
                ) : stepSeq === null ? (
                  <p class="empty">That step's seq is not known yet.</p>
                ) : (
                  <ContextView socket={socket} session={id} seq={stepSeq} />
                )}
              </section>
            )}

            {panel === 'diff' && diff && (
              <section class="panel">
                <DiffView diff={diff.result} title={`Files from seq ${diff.from} to seq ${diff.to}`} />
              </section>
            )}

            {panel === 'revert' && (
              <RevertPanel
                key={shown.seq}
                socket={socket}
                session={id}
                seq={shown.seq}
                idle={live.model?.session.status === 'idle'}
              />
            )}

            <Transcript
              key={`${shown.seq}:${shown.model.messages().length}`}
              model={shown.model}
              revision={shown.seq}
              actions={this.actions}
              window={shown.model.messages().length}
              more={
                shown.messageCount > shown.model.messages().length
                  ? { hidden: shown.messageCount - shown.model.messages().length, load: () => void this.earlier() }
                  : undefined
              }
              label={`Transcript at seq ${shown.seq}`}
            />
          </div>
        )}
      </div>
    )
  }
}
