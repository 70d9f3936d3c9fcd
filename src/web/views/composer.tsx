import { useRef, useState } from 'preact/hooks'
import type { ChronicleSocket, Session } from '../../client/index.js'
import { ErrorNote, useAction } from '../ui.js'

/** The two ways an input reaches a busy session, as the radio buttons offer them. */
const DELIVERIES = [
  ['steer', 'Steer the run'],
  ['queue', 'Queue after it'],
] as const

/**
 * The input box: `input.submit` with a delivery — steer (into the running
 * turn, at the next step) or queue (after the run ends) — and cancel
 * (`run.cancel`). Each input carries an id made here, so the SDK may send it
 * again after a reconnect and the server keeps one copy. Enter sends,
 * Shift+Enter starts a new line.
 */
export function Composer({ socket, session }: { socket: ChronicleSocket; session: Session }) {
  const [text, setText] = useState('')
  const [delivery, setDelivery] = useState<'steer' | 'queue'>('steer')
  const [sent, setSent] = useState<string | undefined>(undefined)
  const box = useRef<HTMLTextAreaElement>(null)
  const running = session.run !== null
  const submit = useAction(async (value: string) => {
    const inputId = newInputId()
    const accepted = await socket.call('input.submit', {
      session: session.id,
      inputId,
      parts: [{ type: 'text', text: value }],
      delivery,
    })
    setText('')
    setSent(`Sent (seq ${accepted.seq})${running ? (delivery === 'steer' ? ', steering the run' : ', queued') : ''}.`)
    box.current?.focus()
    return accepted
  })
  const cancel = useAction(() => socket.call('run.cancel', { session: session.id }))
  const readOnly = session.imported !== undefined
  const send = () => {
    const value = text.trim()
    if (value !== '' && !submit.busy) void submit.start(value)
  }
  if (readOnly)
    return (
      <p class="composer note">
        This session was imported: it is read-only. Fork it (time travel → Fork here) to continue it.
      </p>
    )
  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault()
        send()
      }}
    >
      <label for="composer-text">Message</label>
      <textarea
        id="composer-text"
        ref={box}
        rows={3}
        value={text}
        placeholder="Ask, or steer the run… (Enter sends, Shift+Enter for a new line)"
        onInput={(e) => setText(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
            e.preventDefault()
            send()
          }
        }}
      />
      <div class="composer-actions">
        <fieldset class="delivery">
          <legend>When the session is busy</legend>
          {DELIVERIES.map(([value, label]) => (
            <label key={value}>
              <input
                type="radio"
                name="delivery"
                value={value}
                checked={delivery === value}
                onChange={() => setDelivery(value)}
              />
              {label}
            </label>
          ))}
        </fieldset>
        <button type="submit" class="primary" disabled={submit.busy || text.trim() === ''}>
          Send
        </button>
        {running && (
          <button
            type="button"
            class="danger"
            disabled={cancel.busy || session.run?.cancelRequested}
            onClick={() => void cancel.start()}
          >
            {session.run?.cancelRequested ? 'Cancelling…' : 'Cancel run'}
          </button>
        )}
      </div>
      <p class="sent" aria-live="polite">
        {sent}
      </p>
      <ErrorNote error={submit.error ?? cancel.error} />
    </form>
  )
}

/** A fresh input id (crypto.getRandomValues: unlike randomUUID it works outside secure contexts too). */
function newInputId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12))
  return `in_web_${[...bytes].map((b) => b.toString(16).padStart(2, '0')).join('')}`
}
