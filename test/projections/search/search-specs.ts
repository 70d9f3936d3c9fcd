import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ChronicleEvent } from '../../../src/events/catalogue.js'
import type { EventMeta } from '../../../src/events/envelope.js'
import type { SearchHit } from '../../../src/projections/search/port.js'
import type { IndexQueryOptions } from '../../../src/projections/search/sqlite-query.js'
import { alice, assistant, created, input, model, streamed, T0, toolCall } from './helpers.js'

/**
 * What every engine's index finds (SQLite's: search.test.ts; PostgreSQL's:
 * search.postgres.test.ts): given these sessions (one store, indexed once),
 * each query finds exactly these documents — newest first — with the match
 * marked in its snippet and the event where it first appeared.
 */

/** A real store and its real index, on one engine. */
export interface EngineFixture {
  clock: number
  append(sessionId: string, events: ChronicleEvent[], meta?: EventMeta): Promise<number>
  /** indexes up to the head */
  index(): Promise<void>
  search(query: string, options?: IndexQueryOptions): Promise<SearchHit[]>
  page(query: string, options?: IndexQueryOptions): Promise<{ hits: SearchHit[]; cursor?: string }>
  close(): Promise<void>
}

const DAY = 86_400_000

const tool = (partId: string, name: string, args: unknown, output: string): ChronicleEvent[] => [
  toolCall(partId, name, args),
  { type: 'tool.completed', data: { partId, output } },
]

export function describeSearching(make: () => Promise<EngineFixture>): void {
  const seqs: Record<string, number> = {}
  let f: EngineFixture

  beforeAll(async () => {
    f = await make()
    // ses_a: alice asks about auth, the agent edits src/auth.ts and runs rm -rf build (day 0)
    await f.append('ses_a', [created('Auth bug')], alice)
    seqs.input = await f.append(
      'ses_a',
      [input('in_a', [{ type: 'text', text: 'Why is the login test flaky?' }])],
      alice,
    )
    await f.append('ses_a', [assistant], model)
    seqs.answer = await f.append(
      'ses_a',
      streamed('text', 'prt_answer', ['The login test ', 'is flaky because ', 'src/auth.ts races the clock.']),
      model,
    )
    seqs.edit = await f.append(
      'ses_a',
      tool('prt_edit', 'edit', { filePath: '/repo/src/auth.ts', oldString: 'now()', newString: 'clock.now()' }, 'ok'),
      model,
    )
    seqs.rm = await f.append('ses_a', tool('prt_rm', 'bash', { command: 'rm -rf build --force' }, 'done'), model)
    // ses_b: a day later, bob; prose that has the words but not the code
    f.clock = T0 + DAY
    await f.append('ses_b', [created('Cleanup')], { actor: 'user', by: { id: 'tok_bob', name: 'bob' } })
    await f.append('ses_b', [input('in_b', [{ type: 'text', text: 'rm the rf folder and force the auth ts check' }])], {
      actor: 'user',
      by: { id: 'tok_bob', name: 'bob' },
    })
    await f.append(
      'ses_b',
      [assistant, ...streamed('reasoning', 'prt_think', ['snake_case_name is ', 'the variable'])],
      model,
    )
    await f.append('ses_b', tool('prt_ls', 'bash', { command: 'ls src' }, 'auth.ts\nlogin.ts'), model)
    await f.append(
      'ses_b',
      [
        {
          type: 'permission.requested',
          data: { requestId: 'per_1', permission: 'bash', patterns: ['git push origin'] },
        },
      ],
      { actor: 'tool' },
    )
    await f.append('ses_b', [{ type: 'permission.replied', data: { requestId: 'per_1', reply: 'once' } }], alice)
    await f.index()
  })
  afterAll(() => f?.close())

  const found = async (query: string, options = {}) =>
    (await f.search(query, options)).map((h) => `${h.session}/${h.key}`)

  describe('searching the index', () => {
    it('a word finds every document holding it, newest first', async () => {
      expect(await found('flaky')).toEqual(['ses_a/prt_answer', 'ses_a/in_a'])
    })

    it('two words: both, anywhere in the document', async () => {
      expect(await found('login clock')).toEqual(['ses_a/prt_answer'])
    })

    it('a phrase: its words next to each other, in this order', async () => {
      expect(await found('"login test"')).toEqual(['ses_a/prt_answer', 'ses_a/in_a'])
      expect(await found('test login')).toEqual(['ses_a/prt_answer', 'ses_a/in_a'])
      expect(await found('"test login"')).toEqual([])
      expect(await found('"login flaky"')).toEqual([])
    })

    it('a path as typed finds the path, not prose with its words', async () => {
      expect(await found('src/auth.ts')).toEqual(['ses_a/prt_edit', 'ses_a/prt_answer'])
      expect(await found('auth')).toEqual([
        'ses_b/prt_ls',
        'ses_b/in_b',
        'ses_a/prt_edit',
        'ses_a/prt_answer',
        'ses_a/title',
      ])
    })

    it('rm -rf as a phrase and --force as typed find the command, not the prose', async () => {
      expect(await found('"rm -rf build"')).toEqual(['ses_a/prt_rm'])
      expect(await found('"rm -rf"')).toEqual(['ses_a/prt_rm'])
      expect(await found('--force')).toEqual(['ses_a/prt_rm'])
      expect(await found('force')).toEqual(['ses_b/in_b', 'ses_a/prt_rm'])
    })

    it('snake_case_name as typed, and each of its words', async () => {
      expect(await found('snake_case_name')).toEqual(['ses_b/prt_think'])
      expect(await found('case')).toEqual(['ses_b/prt_think'])
    })

    it('prefix*', async () => {
      expect(await found('flak*')).toEqual(['ses_a/prt_answer', 'ses_a/in_a'])
      expect(await found('src/au*')).toEqual(['ses_a/prt_edit', 'ses_a/prt_answer'])
    })

    it('-excluded words', async () => {
      expect(await found('flaky -clock')).toEqual(['ses_a/in_a'])
    })

    it('session:, tool:, type:, by: (a name or a token id), file:', async () => {
      expect(await found('auth session:ses_b')).toEqual(['ses_b/prt_ls', 'ses_b/in_b'])
      expect(await found('tool:bash')).toEqual(['ses_b/prt_ls', 'ses_a/prt_rm'])
      expect(await found('tool:bash -rm')).toEqual(['ses_b/prt_ls'])
      expect(await found('type:reasoning')).toEqual(['ses_b/prt_think'])
      expect(await found('type:input type:title')).toEqual(['ses_b/in_b', 'ses_b/title', 'ses_a/in_a', 'ses_a/title'])
      expect(await found('by:alice')).toEqual(['ses_b/per_1', 'ses_a/in_a', 'ses_a/title'])
      expect(await found('by:tok_bob')).toEqual(['ses_b/in_b', 'ses_b/title'])
      expect(await found('by:alice type:permission')).toEqual(['ses_b/per_1'])
      expect(await found('file:src/auth.ts')).toEqual(['ses_a/prt_edit'])
      expect(await found('file:auth.ts')).toEqual(['ses_a/prt_edit'])
      expect(await found('file:src/*')).toEqual(['ses_a/prt_edit'])
      expect(await found('file:th.ts')).toEqual([])
      expect(await found('-file:src/auth.ts tool:edit')).toEqual([])
    })

    it('after: and before: by the time of the event that completed the document', async () => {
      expect(await found('type:title after:2026-12-02')).toEqual(['ses_b/title'])
      expect(await found('type:title before:2026-12-02')).toEqual(['ses_a/title'])
    })

    it('a hit names its session and title, the completing event, who, when, and marks the match', async () => {
      const [hit] = await f.search('races')
      expect(hit).toEqual({
        session: 'ses_a',
        title: 'Auth bug',
        seq: seqs.answer as number,
        event: 'text.ended',
        firstSeq: (seqs.answer as number) - 1, // the third delta
        type: 'text',
        key: 'prt_answer',
        by: 'model',
        at: new Date(T0).toISOString(),
        snippet: 'The login test is flaky because src/auth.ts races the clock.',
        highlights: [[44, 49]],
      } satisfies SearchHit)
    })

    it('firstSeq: where the match first appeared — a tool’s call for its input, its result for its output', async () => {
      const [call] = await f.search('clock.now')
      expect([call?.key, call?.seq, call?.firstSeq]).toEqual(['prt_edit', seqs.edit, (seqs.edit as number) - 1])
      const [result] = await f.search('login.ts')
      expect([result?.key, result?.event, result?.firstSeq]).toEqual(['prt_ls', 'tool.completed', result?.seq])
    })

    it('a long document’s snippet is a window around the first match', async () => {
      const g = await make()
      try {
        const filler = 'lorem ipsum dolor sit amet '.repeat(40)
        await g.append('ses_1', [
          created(),
          input('in_1', [{ type: 'text', text: `${filler}the needle is here ${filler}` }]),
        ])
        await g.index()
        const [hit] = await g.search('needle')
        expect(hit?.snippet.startsWith('…')).toBe(true)
        expect(hit?.snippet.endsWith('…')).toBe(true)
        const [start, end] = hit?.highlights[0] ?? [0, 0]
        expect(hit?.snippet.slice(start, end)).toBe('needle')
        expect(hit?.snippet.length).toBeLessThanOrEqual(224)
      } finally {
        await g.close()
      }
    })

    it('a hostile tool output (a NUL, words of 3,000 letters and of 2,100 bytes) is indexed; what comes after it is too', async () => {
      const g = await make()
      try {
        const long = 'あ'.repeat(700) // 2,100 bytes of UTF-8 in a query of 700 characters
        await g.append(
          'ses_h',
          [
            created(),
            ...tool('prt_h', 'bash', { command: 'cat blob' }, `nul\u0000here ${'q'.repeat(3000)} ${long} end`),
          ],
          model,
        )
        await g.append('ses_h', [input('in_after', [{ type: 'text', text: 'written after the blob' }])])
        await g.index()
        expect((await g.search('after')).map((h) => h.key)).toEqual(['in_after'])
        expect((await g.search(long)).map((h) => h.key)).toEqual(['prt_h'])
        expect((await g.search('here')).map((h) => h.key)).toEqual(['prt_h'])
        // a NUL in a query's filters and typed terms finds nothing, and is no server error
        for (const q of [
          'tool:ba\u0000sh',
          'file:src/\u0000x',
          'by:al\u0000ice',
          'session:ses_\u0000h',
          'nul\u0000here.x',
        ])
          expect(await g.search(q)).toEqual([])
      } finally {
        await g.close()
      }
    })

    it('pages by cursor, newest first; by relevance when asked', async () => {
      const first = await f.page('auth', { limit: 2 })
      expect(first.hits.map((h) => h.key)).toEqual(['prt_ls', 'in_b'])
      const second = await f.page('auth', { limit: 2, cursor: first.cursor as string })
      expect(second.hits.map((h) => h.key)).toEqual(['prt_edit', 'prt_answer'])
      const third = await f.page('auth', { limit: 2, cursor: second.cursor as string })
      expect(third).toEqual({ hits: [expect.objectContaining({ key: 'title' })] })
      const ranked = await (await f.search('auth', { order: 'relevance' })).map((h) => h.key)
      expect([...ranked].sort()).toEqual(['in_b', 'prt_answer', 'prt_edit', 'prt_ls', 'title'])
      expect(ranked[0]).toBe('title') // the shortest document with the word ranks first (bm25)
    })

    it('a cursor it did not give is BAD_REQUEST', async () => {
      await expect(f.page('auth', { cursor: 'garbage' })).rejects.toThrow(
        expect.objectContaining({ code: 'BAD_REQUEST' }),
      )
    })
  })
}
