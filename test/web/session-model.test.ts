import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { EventFrame } from '../../src/client/index.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import { history } from '../../src/projections/queries/history.js'
import { openStore } from '../../src/projections/open.js'
import { stateAt } from '../../src/projections/time-travel/time-travel.js'
import { SessionModel } from '../../src/web/session-model.js'
import { play, stepsArb } from '../projections/histories.js'

/**
 * The page's model of a session (src/web/session-model.ts): the state
 * `session.state` answers at some seq, then the session's later events as a
 * subscription delivers them. For random valid histories, split anywhere,
 * it ends equal to the server's state now — also when events come again
 * (a resumed subscription, a reload overlapping live events): those change
 * nothing.
 */

const frame = (e: StoredEvent): EventFrame => ({
  type: 'event',
  sub: 's1',
  seq: e.seq,
  session: e.sessionId,
  version: e.version,
  event: { type: e.type, data: e.data as Record<string, unknown>, at: e.at, meta: e.meta },
})

const byId = <T extends { id: string }>(list: readonly T[]) =>
  JSON.parse(JSON.stringify([...list].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))))

describe('the page’s session model', () => {
  it('state at any seq + the later events, some delivered twice, equals the state now', async () => {
    await fc.assert(
      fc.asyncProperty(stepsArb(80), fc.nat(), fc.nat(), async (steps, cut, repeat) => {
        const store = openStore(':memory:')
        try {
          const { sessions } = await play(store, steps)
          for (const id of sessions) {
            const own = history(store, id, { limit: 5000 }).events.filter((e) => !e.inherited)
            const at = own[cut % own.length] as StoredEvent
            const model = SessionModel.from(stateAt(store, id, at.seq))
            const later = own.filter((e) => e.seq > at.seq)
            for (const [i, e] of later.entries()) {
              expect(model.apply(frame(e))).toBe(true)
              // a repeat of this one or an earlier one: ignored
              const again = own[(repeat + i) % own.length] as StoredEvent
              if (again.seq <= e.seq) expect(model.apply(frame(again))).toBe(false)
            }
            const now = stateAt(store, id)
            expect(model.seq).toBe(now.seq)
            expect(JSON.parse(JSON.stringify(model.session))).toEqual(JSON.parse(JSON.stringify(now.session)))
            expect(byId(model.messages())).toEqual(byId(now.messages))
            expect(byId(model.parts())).toEqual(byId(now.parts))
            // each message's parts, in the order they appeared, each once
            const listed = model.messages().flatMap((m) => model.partsOf(m.id).map((p) => p.id))
            expect(new Set(listed).size).toBe(listed.length)
          }
        } finally {
          store.close()
        }
      }),
      { numRuns: 60 },
    )
  })

  it('ignores another session’s event', async () => {
    const store = openStore(':memory:')
    try {
      const a = store.append(
        'ses_a',
        [{ type: 'session.created', data: { directory: '/a', agent: 'build', model: null } }],
        {
          meta: { actor: 'user' },
        },
      )
      const b = store.append(
        'ses_b',
        [{ type: 'session.created', data: { directory: '/b', agent: 'build', model: null } }],
        {
          meta: { actor: 'user' },
        },
      )
      const model = SessionModel.from(stateAt(store, 'ses_a', (a[0] as StoredEvent).seq))
      expect(model.apply(frame(b[0] as StoredEvent))).toBe(false)
      expect(model.session.id).toBe('ses_a')
    } finally {
      store.close()
    }
  })
})
