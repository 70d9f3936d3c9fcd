import { useEffect, useRef, useState } from 'preact/hooks'
import type { ChronicleSocket, Session } from '../../client/index.js'
import { ErrorNote, useAction } from '../ui.js'

/**
 * Managing a session from its page (docs/WEB.md "Managing"): rename it,
 * archive or unarchive it (`session.update`), and compact it
 * (`session.compact`). The header shows what the log then holds: the new
 * title, the archived badge, the compaction's progress.
 */
export function SessionActions({ socket, session }: { socket: ChronicleSocket; session: Session }) {
  const [renaming, setRenaming] = useState(false)
  const [title, setTitle] = useState(session.title)
  const update = useAction((change: { title?: string; archived?: boolean }) =>
    socket.call('session.update', Object.assign({ session: session.id }, change)),
  )
  const compact = useAction(() => socket.call('session.compact', { session: session.id }))
  const readOnly = session.imported !== undefined
  const compacting = session.compaction?.status === 'requested' || session.compaction?.status === 'running'
  const field = useRef<HTMLInputElement>(null)
  useEffect(() => {
    if (renaming) field.current?.select()
  }, [renaming])
  if (renaming)
    return (
      <form
        class="rename"
        onSubmit={async (e) => {
          e.preventDefault()
          const answer = await update.start({ title: title.trim() })
          if (answer) setRenaming(false)
        }}
      >
        <label for="rename-title">New title</label>
        <input
          id="rename-title"
          class="rename-field"
          value={title}
          maxLength={500}
          required
          onInput={(e) => setTitle(e.currentTarget.value)}
          onKeyDown={(e) => e.key === 'Escape' && setRenaming(false)}
          ref={field}
        />
        <button type="submit" class="primary" disabled={update.busy || title.trim() === ''}>
          Save title
        </button>
        <button type="button" onClick={() => setRenaming(false)}>
          Cancel
        </button>
        <ErrorNote error={update.error} />
      </form>
    )
  return (
    <>
      {!readOnly && (
        <button
          type="button"
          onClick={() => {
            setTitle(session.title)
            setRenaming(true)
          }}
        >
          Rename
        </button>
      )}
      <button type="button" disabled={update.busy} onClick={() => void update.start({ archived: !session.archived })}>
        {session.archived ? 'Unarchive' : 'Archive'}
      </button>
      {!readOnly && !session.archived && (
        <button type="button" disabled={compact.busy || compacting} onClick={() => void compact.start()}>
          {compacting ? 'Compacting…' : 'Compact'}
        </button>
      )}
      <ErrorNote error={update.error ?? compact.error} />
    </>
  )
}
