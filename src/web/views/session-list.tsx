import { useEffect, useRef, useState } from 'preact/hooks'
import type { ChronicleSocket, Session } from '../../client/index.js'
import { sessionHash } from '../route.js'
import { McpSignIns } from './mcp-sign-ins.js'
import { Badge, ErrorNote, formatTime, plural, useAction } from '../ui.js'

/**
 * The session list (`#/`), most recently active first (`session.list`),
 * kept live: a subscription to every session (`"*"`), filtered to the
 * events that change what a row shows, from the head on; each such event
 * reads the first page again (at most every 300 ms).
 */

export const LIST_EVENTS = [
  'session.created',
  'session.forked',
  'session.renamed',
  'session.archived',
  'session.unarchived',
  'session.imported',
  'run.started',
  'run.finished',
  'permission.requested',
  'permission.replied',
] as const

const PAGE = 50

export function SessionList({ socket, navigate }: { socket: ChronicleSocket; navigate: (hash: string) => void }) {
  const [sessions, setSessions] = useState<Session[] | undefined>(undefined)
  const [cursor, setCursor] = useState<string | undefined>(undefined)
  const [archived, setArchived] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const shownPages = useRef(1)
  const heading = useRef<HTMLHeadingElement>(null)

  useEffect(() => heading.current?.focus(), [])

  useEffect(() => {
    let alive = true
    let timer: ReturnType<typeof setTimeout> | undefined
    let sub: { close(): Promise<void> } | undefined
    const read = async () => {
      try {
        const all: Session[] = []
        let next: string | undefined
        for (let page = 0; page < shownPages.current; page++) {
          const r = await socket.call('session.list', {
            limit: PAGE,
            ...(archived && { archived: true }),
            ...(next !== undefined && { cursor: next }),
          })
          all.push(...r.sessions)
          next = r.cursor
          if (next === undefined) break
        }
        if (!alive) return
        setSessions(all)
        setCursor(next)
        setError(undefined)
      } catch (e) {
        if (alive) setError(e)
      }
    }
    const soon = () => {
      if (timer === undefined)
        timer = setTimeout(() => {
          timer = undefined
          void read()
        }, 300)
    }
    void (async () => {
      try {
        const { head } = await socket.call('hello', { protocol: 1 })
        await read()
        if (!alive) return
        sub = await socket.subscribe({ sessions: '*', after: head, types: LIST_EVENTS }, soon)
        if (!alive) void sub.close()
      } catch (e) {
        if (alive) setError(e)
      }
    })()
    return () => {
      alive = false
      clearTimeout(timer)
      void sub?.close()
    }
  }, [socket, archived])

  const more = useAction(async () => {
    if (cursor === undefined) return
    const r = await socket.call('session.list', { limit: PAGE, cursor, ...(archived && { archived: true }) })
    shownPages.current++
    setSessions((s) => [...(s ?? []), ...r.sessions])
    setCursor(r.cursor)
  })

  return (
    <div class="list-page">
      <h1 ref={heading} tabIndex={-1}>
        Sessions
      </h1>
      <McpSignIns socket={socket} />
      <NewSession socket={socket} navigate={navigate} />
      <div class="list-bar">
        <label class="inline">
          <input type="checkbox" checked={archived} onChange={(e) => setArchived(e.currentTarget.checked)} />
          Include archived sessions
        </label>
        <span aria-live="polite">{sessions && plural(sessions.length, 'session')}</span>
      </div>
      <ErrorNote error={error} />
      {sessions === undefined && !error && <p aria-busy="true">Loading…</p>}
      {sessions?.length === 0 && <p class="empty">No sessions yet. Start one above.</p>}
      {sessions && sessions.length > 0 && (
        <ul class="sessions">
          {sessions.map((s) => (
            <li key={s.id} class="session-row">
              <a href={sessionHash(s.id)} class="session-link">
                {s.title}
              </a>
              <Badge kind={s.status}>{s.status}</Badge>
              {s.pendingPermissions.length > 0 && (
                <Badge kind="waiting">{plural(s.pendingPermissions.length, 'approval')} waiting</Badge>
              )}
              {(s.pendingElicitations?.length ?? 0) > 0 && (
                <Badge kind="waiting">{plural(s.pendingElicitations?.length ?? 0, 'question')} waiting</Badge>
              )}
              {s.forkedFrom && <Badge kind="fork">fork</Badge>}
              {s.parent && <Badge kind="fork">sub-agent</Badge>}
              {s.imported && <Badge kind="summary">imported</Badge>}
              {s.archived && <Badge kind="reverted">archived</Badge>}
              <span class="row-facts">
                <span class="dir">{s.directory}</span> · {plural(s.version, 'event')} · updated{' '}
                <time dateTime={s.updatedAt}>{formatTime(s.updatedAt)}</time>
              </span>
            </li>
          ))}
        </ul>
      )}
      {cursor !== undefined && (
        <button type="button" disabled={more.busy} onClick={() => void more.start()}>
          Show more sessions
        </button>
      )}
      <ErrorNote error={more.error} />
    </div>
  )
}

function NewSession({ socket, navigate }: { socket: ChronicleSocket; navigate: (hash: string) => void }) {
  const [directory, setDirectory] = useState('')
  const [title, setTitle] = useState('')
  const create = useAction(async () => {
    const { session } = await socket.call('session.create', {
      ...(directory.trim() !== '' && { directory: directory.trim() }),
      ...(title.trim() !== '' && { title: title.trim() }),
    })
    navigate(sessionHash(session.id))
  })
  return (
    <form
      class="new-session"
      onSubmit={(e) => {
        e.preventDefault()
        void create.start()
      }}
    >
      <div class="field">
        <label for="new-title">Title (optional)</label>
        <input id="new-title" type="text" value={title} onInput={(e) => setTitle(e.currentTarget.value)} />
      </div>
      <div class="field">
        <label for="new-directory">Directory (optional; absolute, default the server's)</label>
        <input
          id="new-directory"
          type="text"
          value={directory}
          onInput={(e) => setDirectory(e.currentTarget.value)}
          spellcheck={false}
        />
      </div>
      <button type="submit" class="primary" disabled={create.busy}>
        New session
      </button>
      <ErrorNote error={create.error} />
    </form>
  )
}
