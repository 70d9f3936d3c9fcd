import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SearchPage } from '../../src/projections/search/port.js'
import type { StartServer, TestServer } from '../http/helpers.js'

/**
 * A hidden secret (docs/SEARCH.md, docs/SECURITY.md), on each engine
 * (search-secrets.test.ts: SQLite; search-secrets.postgres.test.ts): a value
 * the server redacts — its own token, read from a workspace file by a tool —
 * is indexed as the redaction marker, and never appears in the search index:
 * not in what it stores (`inspect` reads that raw), not among its terms, not
 * as a hit.
 */

export const TOKEN = 'chr-sekrit-Zq8vT3xWm9LkPp2RbN7c'
/** the token as the index could hold it: whole, its tail, lower-cased */
export const FORMS = [TOKEN, 'Zq8vT3xWm9LkPp2RbN7c', 'zq8vt3xwm9lkpp2rbn7c']

export function describeHiddenSecret(
  engine: string,
  start: StartServer,
  inspect: (server: TestServer) => Promise<void>,
): void {
  let server: TestServer
  let session: string

  beforeAll(async () => {
    const script = join(mkdtempSync(join(tmpdir(), 'chronicle-script-')), 'script.json')
    writeFileSync(
      script,
      JSON.stringify({
        chunkSize: 64,
        steps: [
          {
            when: { userContains: 'notes', afterToolResult: false },
            toolCalls: [{ id: 'call_read', name: 'read', input: { filePath: 'notes.txt' } }],
          },
          { when: { afterToolResult: true }, text: 'The notes hold a deploy key.' },
        ],
      }),
    )
    server = await start(
      { CHRONICLE_MODEL: `scripted:${script}`, CHRONICLE_LOG_LEVEL: 'warn', CHRONICLE_TOKEN: TOKEN },
      { config: { rules: [{ permission: 'read', pattern: '*', action: 'allow' }] } },
    )
    writeFileSync(join(server.dir, 'notes.txt'), `deploy with token ${TOKEN} tonight\n`)
    const headers = { authorization: `Bearer ${TOKEN}` }
    const created = await server.chronicle.app.inject({
      method: 'POST',
      url: '/sessions',
      headers,
      payload: { directory: server.dir },
    })
    session = created.json().session.id
    const answered = await server.chronicle.app.inject({
      method: 'POST',
      url: `/sessions/${session}/inputs?wait=true`,
      headers,
      payload: { parts: [{ type: 'text', text: 'read my notes' }] },
    })
    expect(answered.statusCode).toBe(200)
  }, 60_000)
  afterAll(() => server.close())

  const search = async (q: string): Promise<SearchPage> => {
    const res = await server.chronicle.app.inject({
      url: `/search?q=${encodeURIComponent(q)}`,
      headers: { authorization: `Bearer ${TOKEN}` },
    })
    expect(res.statusCode).toBe(200)
    return res.json() as SearchPage
  }

  describe(`the search index and a redacted value, on ${engine}`, () => {
    it('indexes the tool’s output with the redaction marker, found as such', async () => {
      const page = await search('tool:read redacted')
      expect(page.indexedThrough).toBeGreaterThanOrEqual(page.head)
      expect(page.hits.map((h) => [h.session, h.type, h.event])).toEqual([[session, 'tool', 'tool.completed']])
      expect(page.hits[0]?.snippet).toContain('deploy with token [redacted:CHRONICLE_TOKEN] tonight')
    })

    it('never holds the value: not as a hit, not among its terms, not in what the index stores', async () => {
      for (const q of [TOKEN, 'Zq8vT3xWm9LkPp2RbN7c', 'zq8vt3*', '"sekrit"']) expect((await search(q)).hits).toEqual([])
      await inspect(server)
    })
  })
}
