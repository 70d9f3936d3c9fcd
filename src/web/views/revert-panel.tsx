import { useState } from 'preact/hooks'
import type { ChronicleSocket, RestoreAnswer } from '../../client/index.js'
import { describeError } from '../connection.js'
import { ErrorNote, plural, useAction } from '../ui.js'

/**
 * Revert the session directory to a seq (`session.revert`, docs/TIME-TRAVEL.md
 * "Revert"). A `WORKSPACE_CONFLICT` lists the files changed outside the agent
 * that the revert would overwrite, and offers to overwrite them (`force`);
 * any other refusal (SESSION_BUSY, NO_WORKSPACE_HISTORY…) shows its code.
 */
export function RevertPanel({
  socket,
  session,
  seq,
  idle,
}: {
  socket: ChronicleSocket
  session: string
  seq: number
  /** the session now: a revert waits for an idle one */
  idle: boolean
}) {
  const [conflict, setConflict] = useState<readonly string[] | undefined>(undefined)
  const [reverted, setReverted] = useState<RestoreAnswer | undefined>(undefined)
  const revert = useAction(async (force: boolean) => {
    setConflict(undefined)
    setReverted(undefined)
    try {
      setReverted(await socket.call('session.revert', { session, to: seq, ...(force && { force: true }) }))
    } catch (err) {
      const { code, details } = describeError(err)
      const files = (details as { files?: unknown } | undefined)?.files
      if (code !== 'WORKSPACE_CONFLICT' || !Array.isArray(files)) throw err
      setConflict(files.map((f) => (typeof f === 'string' ? f : String(f?.path ?? f))))
    }
  })
  return (
    <section class="panel" aria-label="Revert the files">
      <h3>Revert the files to seq {seq}</h3>
      <p>
        The session directory goes back to how it was right after seq {seq}; messages after it are hidden from the model
        (kept in the log). “Undo revert” on the live page brings it back until the next input.
      </p>
      {!idle && <p class="warning">The session is busy: a revert waits for an idle session (SESSION_BUSY).</p>}
      <button type="button" class="danger" disabled={revert.busy} onClick={() => void revert.start(false)}>
        Revert the files to seq {seq}
      </button>
      {conflict && (
        <div class="error" role="alert">
          <strong>WORKSPACE_CONFLICT</strong> these files changed outside the agent and would be overwritten:
          <ul class="files">
            {conflict.map((f) => (
              <li key={f}>
                <code>{f}</code>
              </li>
            ))}
          </ul>
          <button type="button" class="danger" disabled={revert.busy} onClick={() => void revert.start(true)}>
            Revert anyway, overwriting them
          </button>
        </div>
      )}
      {reverted && (
        <p class="ok" role="status">
          Reverted: {plural(reverted.changed.length, 'file')} changed, {plural(reverted.messages.length, 'message')}{' '}
          hidden from the model.
        </p>
      )}
      <ErrorNote error={revert.error} />
    </section>
  )
}
