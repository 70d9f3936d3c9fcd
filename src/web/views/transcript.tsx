import { Component, createRef } from 'preact'
import type { Message, Part } from '../../client/index.js'
import type { SessionModel } from '../session-model.js'
import { Badge, formatCount, formatTime } from '../ui.js'
import { type PartActions, PartView } from './part-view.js'

/**
 * The messages of a session model. Only the latest `window` messages are
 * rendered (earlier ones on request) and each message block has CSS
 * `content-visibility: auto`, so a long session costs the screen, not its
 * length. A message re-renders only when it or one of its parts changed
 * (evolve replaces exactly those objects). The box opens at its end and,
 * while the reader is there, stays at the end as the stream grows.
 *
 * The first draw is the tail: the latest few messages, more (doubling)
 * until they fill the box, all before the first paint; the rest of the
 * window is drawn after that paint, a few messages a task. Above the tail, in a
 * box that opens at its end, they change nothing in view. A cold open's
 * draw costs what the screen shows, not the window (docs/WEB.md).
 */

/** messages drawn at first, and added per "show earlier" */
const WINDOW = 30
/** the tail drawn first, doubled while it does not fill the box; then added per task */
const TAIL = 4

interface Props {
  readonly model: SessionModel
  readonly revision: number
  readonly actions: PartActions
  /** how many of the latest messages are drawn at first (default 30) */
  readonly window?: number
  /** earlier messages the model does not hold yet (a windowed state): how many, and how to fetch them */
  readonly more?: { readonly hidden: number; readonly load: () => void }
  readonly label: string
}

interface State {
  readonly shown: number
  /** while the first draw fills the box: how many of the latest messages are drawn; undefined once all are */
  readonly tail: number | undefined
}

export class Transcript extends Component<Props, State> {
  override state: State = { shown: this.props.window ?? WINDOW, tail: TAIL }
  private readonly box = createRef<HTMLElement>()
  private rest: ReturnType<typeof setTimeout> | undefined

  override componentDidMount(): void {
    this.fill()
  }

  override componentDidUpdate(previous: Props): void {
    // another state (the scrubber moved): back to its end, which is scrollTop 0 in a column-reverse box
    const el = this.box.current
    if (el && previous.model !== this.props.model && el.scrollTop !== 0) el.scrollTop = 0
    this.fill()
  }

  override componentWillUnmount(): void {
    clearTimeout(this.rest)
  }

  /** The first draw: more of the tail while it does not fill the box (before the paint), then the rest after it. */
  private fill(): void {
    const { tail, shown } = this.state
    if (tail === undefined || this.rest !== undefined) return
    const el = this.box.current
    if (tail >= Math.min(shown, this.props.model.messageCount)) this.setState({ tail: undefined })
    else if (!el || el.scrollHeight <= el.clientHeight) this.setState({ tail: tail * 2 })
    else this.rest = setTimeout(this.more, 0)
  }

  /** After the first paint, the rest of the window a few messages a task: no frame or input waits for all of it. */
  private readonly more = (): void => {
    const { tail, shown } = this.state
    if (tail === undefined) return
    const next = tail + TAIL
    if (next >= Math.min(shown, this.props.model.messageCount)) this.setState({ tail: undefined })
    else
      this.setState({ tail: next }, () => {
        this.rest = setTimeout(this.more, 0)
      })
  }

  override render({ model, actions, label }: Props, { shown, tail }: State) {
    const messages = model.messages()
    const hidden = Math.max(0, messages.length - shown)
    const filling = tail !== undefined && messages.length - hidden > tail
    const visible = messages.slice(filling ? messages.length - tail : hidden)
    const step = this.props.window ?? WINDOW
    const asked = askedFor(model)
    return (
      // The box is a column-reverse flex container, so it opens at its end and stays there while the end
      // grows (no scroll position to read or set per frame); the messages inside are in reading order.
      // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard to scroll it
      <section class="transcript" ref={this.box} tabIndex={0} aria-label={label}>
        <div class="transcript-inner">
          {hidden > 0 && !filling && (
            <button type="button" class="earlier" onClick={() => this.setState({ shown: shown + step })}>
              Show earlier messages ({formatCount(hidden)} not shown)
            </button>
          )}
          {hidden === 0 && !filling && this.props.more && (
            <button type="button" class="earlier" onClick={this.props.more.load}>
              Show earlier messages ({formatCount(this.props.more.hidden)} not shown)
            </button>
          )}
          {messages.length === 0 && <p class="empty">No messages yet.</p>}
          {visible.map((m) => {
            const parts = model.partsOf(m.id)
            return (
              <MessageView key={m.id} message={m} parts={parts} actions={actions} waiting={waitingIn(parts, asked)} />
            )
          })}
        </div>
      </section>
    )
  }
}

/** The parts and calls a pending permission request asks about: their tools are waiting for approval. */
function askedFor(model: SessionModel): ReadonlySet<string> {
  const asked = new Set<string>()
  for (const p of model.session.pendingPermissions) {
    if (p.partId) asked.add(p.partId)
    if (p.callId) asked.add(p.callId)
  }
  return asked
}

/** A message's tool parts waiting for approval, as one string a render can compare. */
function waitingIn(parts: readonly Part[], asked: ReadonlySet<string>): string {
  if (asked.size === 0) return ''
  return parts
    .filter((p) => p.type === 'tool' && (asked.has(p.id) || asked.has(p.callId)))
    .map((p) => p.id)
    .join(' ')
}

interface MessageProps {
  readonly message: Message
  readonly parts: readonly Part[]
  readonly actions: PartActions
  /** ids of its tool parts waiting for approval, space separated */
  readonly waiting: string
}

class MessageView extends Component<MessageProps> {
  override shouldComponentUpdate(next: MessageProps): boolean {
    const { message, parts, actions, waiting } = this.props
    if (message !== next.message || actions !== next.actions || waiting !== next.waiting) return true
    if (parts.length !== next.parts.length) return true
    return parts.some((p, i) => p !== next.parts[i])
  }

  override render({ message, parts, actions, waiting }: MessageProps) {
    const waits = waiting === '' ? undefined : new Set(waiting.split(' '))
    const who =
      message.role === 'user'
        ? (message.by?.name ?? 'User')
        : `Assistant${message.agent ? ` · ${message.agent}` : ''}${message.model ? ` · ${message.model}` : ''}`
    return (
      <article class={`message message-${message.role}${message.reverted ? ' reverted' : ''}`} aria-label={who}>
        <header class="message-head">
          <span class="who">{who}</span>
          {message.role === 'user' && message.by && message.by.id !== message.by.name && (
            <span class="principal">({message.by.id})</span>
          )}
          {message.steered && <Badge kind="steer">steered</Badge>}
          {message.summary && <Badge kind="summary">summary</Badge>}
          {message.reverted && <Badge kind="reverted">reverted</Badge>}
          <time dateTime={message.createdAt}>{formatTime(message.createdAt)}</time>
        </header>
        {parts.map((p) => (
          <PartView key={p.id} part={p} actions={actions} waiting={waits?.has(p.id) ?? false} />
        ))}
        {message.error && (
          <p class="tool-error">
            {message.error.kind}: {message.error.message}
          </p>
        )}
      </article>
    )
  }
}
