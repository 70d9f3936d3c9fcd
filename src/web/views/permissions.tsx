import { useState } from 'preact/hooks'
import type { ChronicleSocket, Session } from '../../client/index.js'
import { ErrorNote, useAction } from '../ui.js'

/**
 * The session's pending permission requests, each with once / always /
 * reject (`permission.reply`). A reject may carry a message for the model
 * (then the run goes on with it; a plain reject stops the run). An edit or
 * write request shows the diff it would apply.
 */
export function Permissions({
  socket,
  session,
  readOnly,
}: {
  socket: ChronicleSocket
  session: Session
  readOnly: boolean
}) {
  if (session.pendingPermissions.length === 0) return null
  return (
    <section class="permissions" aria-labelledby="permissions-title">
      <h2 id="permissions-title">Waiting for your approval</h2>
      {session.pendingPermissions.map((p) => (
        <Request key={p.requestId} socket={socket} sessionId={session.id} request={p} readOnly={readOnly} />
      ))}
    </section>
  )
}

function Request({
  socket,
  sessionId,
  request,
  readOnly,
}: {
  socket: ChronicleSocket
  sessionId: string
  request: Session['pendingPermissions'][number]
  readOnly: boolean
}) {
  const [message, setMessage] = useState('')
  const reply = useAction((answer: 'once' | 'always' | 'reject') =>
    socket.call('permission.reply', {
      session: sessionId,
      requestId: request.requestId,
      reply: answer,
      ...(answer === 'reject' && message.trim() !== '' && { message: message.trim() }),
    }),
  )
  const diff = typeof request.metadata?.diff === 'string' ? request.metadata.diff : undefined
  const description = typeof request.metadata?.description === 'string' ? request.metadata.description : undefined
  const inputId = `reject-${request.requestId}`
  return (
    <section class="request" aria-label={`Permission request: ${request.permission}`}>
      <p>
        <strong>{request.permission}</strong>
        {description && ` — ${description}`}
        {request.from && (
          <span class="from">
            {' '}
            (asked by a sub-agent in <a href={`#/s/${request.from.sessionId}`}>{request.from.sessionId}</a>)
          </span>
        )}
      </p>
      <ul class="patterns">
        {request.patterns.map((pattern) => (
          <li key={pattern}>
            <code>{pattern}</code>
          </li>
        ))}
      </ul>
      {request.metadata?.sandbox === 'unavailable' && (
        <p class="warning">No sandbox can run here: this command would run unconfined.</p>
      )}
      {diff && (
        <details open>
          <summary>The change</summary>
          <pre class="diff">{diff}</pre>
        </details>
      )}
      <div class="actions">
        <button type="button" disabled={reply.busy || readOnly} onClick={() => void reply.start('once')}>
          Allow once
        </button>
        <button type="button" disabled={reply.busy || readOnly} onClick={() => void reply.start('always')}>
          Allow always
        </button>
        <button
          type="button"
          class="danger"
          disabled={reply.busy || readOnly}
          onClick={() => void reply.start('reject')}
        >
          Reject
        </button>
        <label for={inputId} class="inline">
          Message with a reject (optional)
        </label>
        <input
          id={inputId}
          type="text"
          value={message}
          onInput={(e) => setMessage(e.currentTarget.value)}
          disabled={readOnly}
        />
      </div>
      <ErrorNote error={reply.error} />
    </section>
  )
}
