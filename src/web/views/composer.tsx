import { useRef, useState } from 'preact/hooks'
import type { ChronicleSocket, Session } from '../../client/index.js'
import { type Attachment, currentInputLimit, encodedBytes, learnInputLimit, readAttachment } from '../attachments.js'
import { atHash, sessionHash } from '../route.js'
import { parseSlash, type SlashCommand, slashHints } from '../slash-commands.js'
import { ErrorNote, formatBytes, useAction } from '../ui.js'

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
 * Shift+Enter starts a new line. Files (picker, drop, paste) go with the text
 * as file parts (src/web/attachments.ts); `/compact`, `/fork` and `/revert`
 * run the session's actions (src/web/slash-commands.ts).
 */
export function Composer({ socket, session }: { socket: ChronicleSocket; session: Session }) {
  const [text, setText] = useState('')
  const [delivery, setDelivery] = useState<'steer' | 'queue'>('steer')
  const [sent, setSent] = useState<string | undefined>(undefined)
  const [files, setFilesState] = useState<readonly Attachment[]>([])
  // The list as of the last change, not the last render: a drop and a paste
  // in quick succession each add to what the other added.
  const held = useRef<readonly Attachment[]>([])
  const setFiles = (next: readonly Attachment[]) => {
    held.current = next
    setFilesState(next)
  }
  // Files are read one delivery at a time, so each is checked against the
  // limit with every file before it counted.
  const reading = useRef(Promise.resolve())
  const [refused, setRefused] = useState<string | undefined>(undefined)
  const box = useRef<HTMLTextAreaElement>(null)
  const picker = useRef<HTMLInputElement>(null)
  const running = session.run !== null
  const submit = useAction(async (value: string) => {
    const inputId = newInputId()
    const parts = [
      ...(value === '' ? [] : [{ type: 'text' as const, text: value }]),
      ...files.map((f) => ({ type: 'file' as const, url: f.url, mediaType: f.mediaType, filename: f.name })),
    ]
    const accepted = await socket
      .call('input.submit', { session: session.id, inputId, parts, delivery })
      .catch((err) => {
        learnInputLimit(err)
        throw err
      })
    setText('')
    setFiles([])
    setSent(`Sent (seq ${accepted.seq})${running ? (delivery === 'steer' ? ', steering the run' : ', queued') : ''}.`)
    box.current?.focus()
    return accepted
  })
  const command = useAction(async (slash: SlashCommand) => {
    const done = await runSlash(socket, session, slash)
    setText('')
    setSent(done)
  })
  const cancel = useAction(() => socket.call('run.cancel', { session: session.id }))
  const readOnly = session.imported !== undefined
  const send = () => {
    const value = text.trim()
    if (submit.busy || command.busy) return
    let slash: SlashCommand | undefined
    try {
      slash = files.length === 0 ? parseSlash(value) : undefined
    } catch (err) {
      command.setError(err)
      return
    }
    if (slash) void command.start(slash)
    else if (value !== '' || files.length > 0) void submit.start(value)
  }
  const attach = (list: FileList | readonly File[] | null | undefined) => {
    const delivered = [...(list ?? [])]
    setRefused(undefined)
    reading.current = reading.current.then(async () => {
      for (const file of delivered) {
        try {
          setFiles([...held.current, await readAttachment(file, held.current)])
        } catch (err) {
          setRefused(err instanceof Error ? err.message : String(err))
        }
      }
    })
    return reading.current
  }
  const hints = slashHints(text)
  const limit = currentInputLimit()
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
      onDragOver={(e) => {
        if (e.dataTransfer?.types.includes('Files')) e.preventDefault()
      }}
      onDrop={(e) => {
        if (!e.dataTransfer?.files.length) return
        e.preventDefault()
        void attach(e.dataTransfer.files)
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
        onPaste={(e) => {
          const pasted = e.clipboardData?.files
          if (pasted?.length) {
            e.preventDefault()
            void attach(pasted)
          }
        }}
        aria-describedby="composer-hint"
        onKeyDown={(e) => {
          if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
            e.preventDefault()
            send()
          }
        }}
      />
      <p id="composer-hint" class="composer-hint">
        {hints.length > 0
          ? hints.map((h) => (
              <span key={h.name}>
                <kbd>{h.usage}</kbd> {h.does}{' '}
              </span>
            ))
          : `/compact, /fork, /revert run session actions. Images and PDFs: up to ${formatBytes(limit)} in all.`}
      </p>
      {files.length > 0 && (
        <ul class="attachments" aria-label="Attachments">
          {files.map((f, i) => (
            <li key={`${i}:${f.name}`}>
              <span class="attachment-name">{f.name}</span> <span class="who">({formatBytes(f.size)})</span>{' '}
              <button
                type="button"
                class="small"
                aria-label={`Remove ${f.name}`}
                onClick={() => setFiles(held.current.filter((_, j) => j !== i))}
              >
                Remove
              </button>
            </li>
          ))}
          <li class="who">
            {formatBytes(encodedBytes(files))} of {formatBytes(limit)} used
          </li>
        </ul>
      )}
      {refused && (
        <p class="error" role="alert">
          {refused}
        </p>
      )}
      <div class="composer-actions">
        <input
          ref={picker}
          id="composer-files"
          hidden
          aria-label="Files to attach"
          type="file"
          multiple
          accept="image/png,image/jpeg,image/gif,image/webp,application/pdf"
          onChange={(e) => {
            void attach(e.currentTarget.files).then(() => {
              if (picker.current) picker.current.value = ''
            })
          }}
        />
        <button type="button" onClick={() => picker.current?.click()}>
          Attach files…
        </button>
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
        <button type="submit" class="primary" disabled={submit.busy || (text.trim() === '' && files.length === 0)}>
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
      <ErrorNote error={submit.error ?? command.error ?? cancel.error} />
    </form>
  )
}

/** Runs a slash command; what to say when it is done. A fork opens the child, a revert without a seq the scrubber. */
async function runSlash(socket: ChronicleSocket, session: Session, slash: SlashCommand): Promise<string> {
  switch (slash.name) {
    case 'compact': {
      const answer = await socket.call('session.compact', { session: session.id })
      return answer.duplicate ? 'A compaction is already under way.' : `Compaction requested (seq ${answer.seq}).`
    }
    case 'fork': {
      const at = slash.at ?? session.lastSeq
      const child = await socket.call('session.fork', { session: session.id, at })
      location.hash = sessionHash(child.session.id)
      return `Forked at seq ${at}.`
    }
    case 'revert': {
      if (slash.to === undefined) {
        location.hash = atHash(session.id, null)
        return 'Choose the seq to revert to, then "Revert files to here…".'
      }
      await socket.call('session.revert', { session: session.id, to: slash.to })
      return `Files reverted to seq ${slash.to}.`
    }
  }
}

/** A fresh input id (crypto.getRandomValues: unlike randomUUID it works outside secure contexts too). */
function newInputId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12))
  return `in_web_${[...bytes].map((b) => b.toString(16).padStart(2, '0')).join('')}`
}
