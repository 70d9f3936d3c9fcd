import { type ChainAnchor, type ChainReport, checkChain } from '../../events/chain-check.js'
import type { EventStore } from '../../events/store.js'
import { foldSession } from '../fold/fold.js'
import type { SessionView } from '../fold/model.js'
import { loadView } from '../queries/read-model.js'
import type { Progress } from './rebuild.js'

export interface Difference {
  readonly sessionId: string
  readonly entity: 'session' | 'message' | 'part'
  readonly id: string
  /** what the stored read model holds (undefined: missing) */
  readonly stored: unknown
  /** what a fresh fold of the log gives (undefined: should not exist) */
  readonly expected: unknown
}

export interface VerifyReport {
  readonly sessions: number
  readonly differences: Difference[]
  /** the hash chains checked over every stored event (docs/AUDIT.md) */
  readonly chain: ChainReport
}

/**
 * Checks the log's hash chains, then compares every stored read model with a
 * fresh fold of the log and reports each difference.
 */
export function verify(
  store: EventStore,
  options: { progress?: Progress; chainProgress?: Progress; anchor?: ChainAnchor } = {},
): VerifyReport {
  const db = store.reader()
  const chain = checkChain(db, {
    ...(options.chainProgress && { progress: options.chainProgress }),
    ...(options.anchor && { anchor: options.anchor }),
  })
  const fromLog = db
    .prepare(
      "SELECT session_id FROM events WHERE version = 1 AND session_id NOT LIKE 'sys\\_%' ESCAPE '\\' ORDER BY seq",
    )
    .pluck()
    .all() as string[]
  const stored = db.prepare('SELECT id FROM sessions').pluck().all() as string[]
  const logged = new Set(fromLog)
  const ids = [...new Set([...fromLog, ...stored])]
  const differences: Difference[] = []
  ids.forEach((sessionId, i) => {
    const expected = logged.has(sessionId) ? foldSession(store, sessionId) : null
    differences.push(...diffViews(sessionId, loadView(store, sessionId), expected))
    options.progress?.(i + 1, ids.length)
  })
  return { sessions: ids.length, differences, chain }
}

export function diffViews(sessionId: string, stored: SessionView, expected: SessionView | null): Difference[] {
  const out: Difference[] = []
  // As JSON (what is stored), key order aside: a row's keys may come out in another order than a fresh object's.
  const same = (a: unknown, b: unknown) => canonical(a) === canonical(b)
  const exp = expected ?? { session: null, messages: new Map(), parts: new Map() }
  if (!same(stored.session, exp.session)) {
    out.push({
      sessionId,
      entity: 'session',
      id: sessionId,
      stored: stored.session ?? undefined,
      expected: exp.session ?? undefined,
    })
  }
  const compare = (entity: 'message' | 'part', a: Map<string, unknown>, b: Map<string, unknown>) => {
    for (const id of new Set([...a.keys(), ...b.keys()])) {
      if (!same(a.get(id), b.get(id))) out.push({ sessionId, entity, id, stored: a.get(id), expected: b.get(id) })
    }
  }
  compare('message', stored.messages, exp.messages)
  compare('part', stored.parts, exp.parts)
  return out
}

function canonical(value: unknown): string {
  return (
    JSON.stringify(value, (_key, v: unknown) =>
      v !== null && typeof v === 'object' && !Array.isArray(v)
        ? Object.fromEntries(
            Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
          )
        : v,
    ) ?? 'undefined'
  )
}
