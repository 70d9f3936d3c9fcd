import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks'
import type { ChronicleSocket, DiffView as Diff, Session, StateView } from '../../client/index.js'
import { frameScheduler } from '../frame.js'
import { LiveSession } from '../live-session.js'
import { atHash, sessionHash } from '../route.js'
import { canAskForNotifications, useNotices } from '../notices.js'
import { StepIndexLoader } from '../step-index.js'
import { ErrorNote, useAction } from '../ui.js'
import { Composer } from './composer.js'
import { ContextView } from './context-view.js'
import { DiffView } from './diff-view.js'
import { Elicitations } from './elicitations.js'
import { EventsList } from './events-list.js'
import { formatCost, type PartActions, usageText } from './part-view.js'
import { Permissions } from './permissions.js'
import { Rules } from './rules.js'
import { SharePanel } from './share-panel.js'
import { SessionActions } from './session-actions.js'
import { TimeTravel } from './time-travel.js'
import { Transcript } from './transcript.js'

/**
 * A session (`#/s/<id>`, live) or the session at a seq (`#/s/<id>@<seq>`,
 * the scrubber). Both share the live model: the header and the scrubber's
 * end follow the session as it goes on. Redraws are batched per animation
 * frame whatever the event rate. `performance.measure('chronicle:open')`
 * times the open, from here to the first drawn state (bench/web.ts); at a
 * cold open the state was asked for before (start.ts), so its end in the
 * tab's clock is the figure.
 */
export function SessionPage({
  socket,
  id,
  firstState,
  at,
  navigate,
}: {
  socket: ChronicleSocket
  id: string
  /** the session's state read ahead of the page (start.ts), taken once */
  firstState?: ((id: string) => Promise<StateView> | undefined) | undefined
  /** undefined: live; null: the scrubber at the head; a number: the scrubber there */
  at: number | null | undefined
  navigate: (hash: string) => void
}) {
  const [, setTick] = useState(0)
  const redraw = useMemo(() => frameScheduler(() => setTick((t) => t + 1)), [])
  const live = useMemo(() => {
    performance.mark(`chronicle:open-start:${id}`)
    return new LiveSession(socket, id, firstState?.(id))
  }, [socket, id])
  const steps = useMemo(() => new StepIndexLoader(socket, id, redraw), [socket, id, redraw])
  // a layout effect: the state is asked for right after this render, not a frame later
  useLayoutEffect(() => {
    const off = live.onChange(() => redraw())
    void live.open()
    return () => {
      off()
      live.close()
      steps.close()
    }
  }, [live, steps, redraw])
  const opened = useRef<string | undefined>(undefined)
  useLayoutEffect(() => {
    if (live.model && opened.current !== id) {
      opened.current = id
      performance.measure('chronicle:open', `chronicle:open-start:${id}`)
    }
  })
  const heading = useRef<HTMLHeadingElement>(null)
  useEffect(() => heading.current?.focus(), [id])

  const model = live.model
  const session = model?.session
  useNotices(session)
  return (
    <div class="session-page">
      <header class="session-head">
        <p class="crumbs">
          <a href="#/">Sessions</a>
        </p>
        <h1 ref={heading} tabIndex={-1}>
          {session?.title ?? id}
        </h1>
        {session && <SessionFacts session={session} />}
        <p class="status-line" role="status" aria-live="polite">
          {session ? statusText(session, model.seq) : live.error ? '' : 'Loading the session…'}
        </p>
        {session && <HeaderActions socket={socket} session={session} mode={at === undefined ? 'live' : 'at'} />}
      </header>
      <ErrorNote error={live.error} />
      {model &&
        session &&
        (at === undefined ? (
          <LiveBody socket={socket} live={live} revision={model.revision} steps={steps} />
        ) : (
          <TimeTravel
            socket={socket}
            live={live}
            revision={model.revision}
            id={id}
            seq={at}
            steps={steps}
            stepsRevision={steps.index?.steps.length ?? -1}
            navigate={navigate}
          />
        ))}
    </div>
  )
}

function SessionFacts({ session }: { session: Session }) {
  return (
    <p class="facts-line">
      <code>{session.id}</code> · {session.agent}
      {session.model && ` · ${session.model}`} · <span class="dir">{session.directory}</span>
      {session.forkedFrom && (
        <>
          {' '}
          · fork of{' '}
          <a href={atHash(session.forkedFrom.sessionId, session.forkedFrom.seq)}>
            {session.forkedFrom.sessionId}@{session.forkedFrom.seq}
          </a>
        </>
      )}
      {session.parent && (
        <>
          {' '}
          · sub-agent of <a href={sessionHash(session.parent.sessionId)}>{session.parent.sessionId}</a>
        </>
      )}
      {session.imported && ' · imported (read-only)'}
      {session.archived && ' · archived'}
      {session.totals.inputTokens + session.totals.outputTokens > 0 && (
        <span class="session-usage">
          {' '}
          · {usageText(session.totals)}
          {session.totals.cost > 0 && ` · ${formatCost(session.totals.cost)}`}
        </span>
      )}
    </p>
  )
}

function statusText(session: Session, seq: number): string {
  const at = ` (seq ${seq})`
  switch (session.status) {
    case 'busy':
      return `Working…${session.run?.cancelRequested ? ' cancelling' : ''}${at}`
    case 'waiting': {
      const asks = [
        ...session.pendingPermissions.map((p) => p.permission),
        ...(session.pendingElicitations ?? []).map((e) => `a question from ${e.server}`),
      ]
      return `Waiting for you: ${asks.join(', ')}${at}`
    }
    case 'retrying':
      return `Retrying after a provider error (attempt ${session.retry?.attempt ?? '?'})${at}`
    case 'idle': {
      const outcome = session.lastRun?.outcome
      return `Idle${outcome && outcome !== 'idle' ? ` — the last run ended: ${outcome}` : ''}${at}`
    }
  }
}

function HeaderActions({ socket, session, mode }: { socket: ChronicleSocket; session: Session; mode: 'live' | 'at' }) {
  const unrevert = useAction(() => socket.call('session.unrevert', { session: session.id }))
  const [askNotify, setAskNotify] = useState(canAskForNotifications)
  return (
    <div class="actions head-actions">
      {mode === 'live' ? (
        <a class="button" href={atHash(session.id, null)}>
          Time travel
        </a>
      ) : (
        <a class="button" href={sessionHash(session.id)}>
          Live
        </a>
      )}
      {/* the server's export (GET with the cookie): the file `chronicle export` writes, which `chronicle import` takes */}
      <a class="button" href={`/sessions/${encodeURIComponent(session.id)}/export`} download={`${session.id}.jsonl`}>
        Export (JSONL)
      </a>
      {mode === 'live' && <SessionActions socket={socket} session={session} />}
      {askNotify && (
        <button
          type="button"
          onClick={() => void Notification.requestPermission().finally(() => setAskNotify(canAskForNotifications()))}
        >
          Notify me in the background
        </button>
      )}
      {session.revert && (
        <button type="button" disabled={unrevert.busy} onClick={() => void unrevert.start()}>
          Undo revert to seq {session.revert.to}
        </button>
      )}

      <ErrorNote error={unrevert.error} />
    </div>
  )
}

function LiveBody({
  socket,
  live,
  revision,
  steps,
}: {
  socket: ChronicleSocket
  live: LiveSession
  revision: number
  steps: StepIndexLoader
}) {
  const model = live.model
  const [tab, setTab] = useState<'transcript' | 'events'>('transcript')
  const [panel, setPanel] = useState<
    { kind: 'context'; seq: number | null } | { kind: 'diff'; from: number; to: number } | undefined
  >(undefined)
  const [panelError, setPanelError] = useState<unknown>(undefined)
  const actions = useMemo<PartActions>(
    () => ({
      onContext: (partId) => {
        setPanel({ kind: 'context', seq: null })
        steps
          .ensure()
          .then((index) => setPanel({ kind: 'context', seq: index.stepOfPart(partId)?.seq ?? null }), setPanelError)
      },
      onDiff: (messageId) => {
        steps.ensure().then((index) => {
          const range = index.messageDiffRange(messageId)
          if (range) setPanel({ kind: 'diff', ...range })
          else setPanelError(new Error('no recorded workspace change for this message'))
        }, setPanelError)
      },
    }),
    [steps],
  )
  if (!model) return null
  const session = model.session
  const readOnly = session.imported !== undefined
  return (
    <div class="session-body">
      <div class="main-col">
        <div class="tabs">
          <button type="button" aria-pressed={tab === 'transcript'} onClick={() => setTab('transcript')}>
            Transcript
          </button>
          <button type="button" aria-pressed={tab === 'events'} onClick={() => setTab('events')}>
            Events
          </button>
        </div>
        {tab === 'transcript' ? (
          <Transcript model={model} revision={revision} actions={actions} label="Transcript" />
        ) : (
          <EventsList socket={socket} live={live} revision={revision} />
        )}
        {panel && (
          <section class="panel" aria-label={panel.kind === 'context' ? 'What the model saw' : 'Diff'}>
            <button type="button" class="close" onClick={() => setPanel(undefined)}>
              Close
            </button>
            {panel.kind === 'context' ? (
              <>
                <h2>What the model saw</h2>
                {panel.seq === null ? (
                  <p aria-busy="true">Finding the step…</p>
                ) : (
                  <ContextView socket={socket} session={session.id} seq={panel.seq} />
                )}
              </>
            ) : (
              <DiffPanel socket={socket} session={session.id} from={panel.from} to={panel.to} />
            )}
          </section>
        )}
        <ErrorNote error={panelError} />
        <Permissions socket={socket} session={session} readOnly={readOnly} />
        <Elicitations socket={socket} session={session} readOnly={readOnly} />
        <Composer socket={socket} session={session} />
      </div>
      <aside class="side" aria-label="Session details">
        {session.inbox.length > 0 && (
          <section aria-labelledby="inbox-title">
            <h2 id="inbox-title">Queued inputs</h2>
            <ul class="inbox">
              {session.inbox.map((i) => (
                <li key={i.inputId}>
                  {i.parts.map((p) => (p.type === 'text' ? p.text : `[file ${p.path ?? p.url ?? ''}]`)).join(' ')}
                  <span class="who">
                    {' '}
                    — {i.delivery}
                    {i.by && `, by ${i.by.name}`}
                  </span>
                </li>
              ))}
            </ul>
          </section>
        )}
        {session.todos.length > 0 && (
          <section aria-labelledby="todos-title">
            <h2 id="todos-title">Todos</h2>
            <ul class="todos">
              {session.todos.map((t, i) => (
                <li key={i} class={`todo-${t.status}`}>
                  {t.content} <span class="who">({t.status})</span>
                </li>
              ))}
            </ul>
          </section>
        )}
        <Rules socket={socket} sessionId={session.id} approvalsKey={session.approvals} readOnly={readOnly} />
        <SharePanel socket={socket} sessionId={session.id} />
      </aside>
    </div>
  )
}

function DiffPanel({
  socket,
  session,
  from,
  to,
}: {
  socket: ChronicleSocket
  session: string
  from: number
  to: number
}) {
  const [diff, setDiff] = useState<Diff | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  useEffect(() => {
    let alive = true
    socket.call('session.diff', { session, from, to }).then(
      (d) => alive && setDiff(d),
      (e: unknown) => alive && setError(e),
    )
    return () => {
      alive = false
    }
  }, [socket, session, from, to])
  if (error) return <ErrorNote error={error} />
  if (!diff) return <p aria-busy="true">Reading the diff…</p>
  return <DiffView diff={diff} title={`Files changed from seq ${from} to seq ${to}`} />
}
