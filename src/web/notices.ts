import { useEffect, useRef } from 'preact/hooks'
import type { Session } from '../client/index.js'

/**
 * Noticing a session from another tab (docs/WEB.md "Noticing"): the tab's
 * title says when the session waits for you and when a run ended while the
 * page was in the background, and — when the user allowed it — a browser
 * notification says the same. Nothing is said while the page is in view: the
 * page itself shows it.
 */

const APP = 'Chronicle'

/** The tab's title for a session: what waits first, then the title. */
export function tabTitle(session: Session, ended: boolean): string {
  const waiting = session.status === 'waiting'
  return `${waiting ? '● Waiting for you · ' : ended ? '✓ Run ended · ' : ''}${session.title} — ${APP}`
}

export function useNotices(session: Session | undefined): void {
  const seen = useRef<{ waiting: boolean; run: string | undefined; ended: boolean } | undefined>(undefined)
  const current = useRef(session)
  current.current = session
  useEffect(() => {
    if (!session) return
    const previous = seen.current
    const waiting = session.status === 'waiting'
    const run = session.lastRun?.runId
    const hidden = document.visibilityState === 'hidden'
    const endedNow = previous !== undefined && run !== undefined && run !== previous.run && session.run === null
    const ended = hidden && (endedNow || (previous?.ended ?? false))
    if (hidden && previous && waiting && !previous.waiting) notify(session, 'is waiting for you', whatWaits(session))
    if (hidden && endedNow) notify(session, 'finished its run', `The run ended: ${session.lastRun?.outcome ?? 'idle'}`)
    seen.current = { waiting, run, ended }
    setTitle(tabTitle(session, ended))
  })
  // Registered once, not per render: a streaming session renders up to every frame, and re-adding a
  // document listener each time cost Chromium about half a millisecond a render (bench web, streams).
  useEffect(() => {
    const onVisible = () => {
      const session = current.current
      if (document.visibilityState !== 'visible' || !seen.current || !session) return
      seen.current = Object.assign({}, seen.current, { ended: false })
      setTitle(tabTitle(session, false))
    }
    document.addEventListener('visibilitychange', onVisible)
    return () => document.removeEventListener('visibilitychange', onVisible)
  }, [])
  useEffect(
    () => () => {
      document.title = APP
    },
    [],
  )
}

/** Setting the title replaces its text node even when unchanged: only when it changes. */
function setTitle(title: string): void {
  if (document.title !== title) document.title = title
}

function whatWaits(session: Session): string {
  const asks = [
    ...session.pendingPermissions.map((p) => `permission: ${p.permission}`),
    ...(session.pendingElicitations ?? []).map((e) => `a question from ${e.server}`),
  ]
  return asks.join(', ')
}

function notify(session: Session, what: string, body: string): void {
  if (typeof Notification === 'undefined' || Notification.permission !== 'granted') return
  // one notification per session (tag): a newer one replaces the older
  const note = new Notification(`${session.title} ${what}`, { body, tag: session.id })
  note.onclick = () => {
    window.focus()
    note.close()
  }
}

/** Whether the page may still ask for notifications (the user has not answered). */
export function canAskForNotifications(): boolean {
  return typeof Notification !== 'undefined' && Notification.permission === 'default'
}
