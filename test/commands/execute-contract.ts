import { describe, expect, it } from 'vitest'
import { execute } from '../../src/commands/execute.js'
import { decideSession } from '../../src/commands/session.js'
import { ChronicleError } from '../../src/events/errors.js'
import type { StorePorts } from '../../src/projections/store-ports.js'

/**
 * The one command path over either engine's ports (src/commands/execute.ts): what it decides, it decides on
 * the session as it is when its append commits. A write between its read and its append (another command of
 * this process, another server) makes it decide again on the newer state; a conflict that never ends is the
 * caller's, and what the decider throws is never retried.
 */
export function executeContract(engine: string, open: () => Promise<{ ports: StorePorts; close(): Promise<void> }>) {
  describe(`execute on ${engine}`, () => {
    const meta = { actor: 'user' } as const
    const create = (ports: StorePorts, id: string) =>
      execute(
        ports,
        id,
        (s) => decideSession({ type: 'create', directory: '/w', agent: 'build', model: null }, s, id),
        {
          meta,
        },
      )
    /** The ports, with `between` run once after each of the first `times` reads of `id`: a write that races. */
    const racing = (ports: StorePorts, id: string, times: number, between: () => Promise<unknown>): StorePorts => {
      let left = times
      return Object.assign({}, ports, {
        readModels: Object.assign({}, ports.readModels, {
          session: async (sessionId: string) => {
            const read = await ports.readModels.session(sessionId)
            if (sessionId === id && left-- > 0) await between()
            return read
          },
        }),
      })
    }

    it('decides again on the newer state when a write came between its read and its append', async () => {
      const { ports, close } = await open()
      try {
        await create(ports, 'ses_a')
        const rename = (title: string) =>
          execute(ports, 'ses_a', (s) => decideSession({ type: 'rename', title }, s, 'ses_a'), { meta })
        const seen: (string | undefined)[] = []
        const { events, state } = await execute(
          racing(ports, 'ses_a', 2, () => rename(`raced ${seen.length}`)),
          'ses_a',
          (s) => {
            seen.push(s?.title)
            return [{ type: 'session.renamed', data: { title: `after ${s?.title}` } }]
          },
          { meta },
        )
        // two reads were overtaken; the third decision is the one appended, on the state the races left
        expect(seen).toEqual(['New session', 'raced 0', 'raced 1'])
        expect(state?.title).toBe('raced 1')
        expect(events.map((e) => e.version)).toEqual([4])
        expect((await ports.readModels.session('ses_a'))?.title).toBe('after raced 1')
      } finally {
        await close()
      }
    })

    it('gives up with VERSION_CONFLICT after five overtaken decisions, appending nothing of its own', async () => {
      const { ports, close } = await open()
      try {
        await create(ports, 'ses_b')
        let raced = 0
        const race = () =>
          execute(ports, 'ses_b', (s) => decideSession({ type: 'rename', title: `r${++raced}` }, s, 'ses_b'), {
            meta,
          })
        const attempt = execute(
          racing(ports, 'ses_b', 5, race),
          'ses_b',
          () => [{ type: 'session.renamed', data: { title: 'mine' } }],
          { meta },
        )
        await expect(attempt).rejects.toMatchObject({ code: 'VERSION_CONFLICT' })
        const events = await ports.log.readSession('ses_b')
        expect(events.map((e) => (e.type === 'session.renamed' ? e.data.title : e.type))).toEqual([
          'session.created',
          'r1',
          'r2',
          'r3',
          'r4',
          'r5',
        ])
      } finally {
        await close()
      }
    })

    it('never retries what the decider throws, a conflict of its own included', async () => {
      const { ports, close } = await open()
      try {
        await create(ports, 'ses_c')
        let calls = 0
        const refused = execute(
          ports,
          'ses_c',
          () => {
            calls++
            throw new ChronicleError('VERSION_CONFLICT', 'not in progress')
          },
          { meta },
        )
        await expect(refused).rejects.toMatchObject({ code: 'VERSION_CONFLICT', message: 'not in progress' })
        expect(calls).toBe(1)
        expect(await ports.log.version('ses_c')).toBe(1)
      } finally {
        await close()
      }
    })
  })
}
