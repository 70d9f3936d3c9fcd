import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SearchPage } from '../../src/projections/search/port.js'
import { startServer, type TestServer } from '../http/helpers.js'

/**
 * A hidden secret (docs/SEARCH.md, docs/SECURITY.md): a value the server
 * redacts — its own token, read from a workspace file by a tool — is
 * indexed as the redaction marker, and never appears in the search index:
 * not in its file's raw bytes (nor its WAL), not among its terms, not as a hit.
 */

const TOKEN = 'chr-sekrit-Zq8vT3xWm9LkPp2RbN7c'
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
  server = await startServer(
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

describe('the search index and a redacted value', () => {
  it('indexes the tool’s output with the redaction marker, found as such', async () => {
    const page = await search('tool:read redacted')
    expect(page.indexedThrough).toBeGreaterThanOrEqual(page.head)
    expect(page.hits.map((h) => [h.session, h.type, h.event])).toEqual([[session, 'tool', 'tool.completed']])
    expect(page.hits[0]?.snippet).toContain('deploy with token [redacted:CHRONICLE_TOKEN] tonight')
  })

  it('never holds the value: not as a hit, not among its terms, not in the file’s bytes', async () => {
    for (const q of [TOKEN, 'Zq8vT3xWm9LkPp2RbN7c', 'zq8vt3*', '"sekrit"']) expect((await search(q)).hits).toEqual([])
    const { dataDir } = server.chronicle.config
    const files = ['search.db', 'search.db-wal'].map((n) => join(dataDir, n)).filter((f) => existsSync(f))
    expect(files).toContain(join(dataDir, 'search.db'))
    for (const file of files) {
      const bytes = readFileSync(file)
      expect(bytes.includes(TOKEN), file).toBe(false)
      expect(bytes.includes('Zq8vT3xWm9LkPp2RbN7c'), file).toBe(false)
      expect(bytes.includes('zq8vt3xwm9lkpp2rbn7c'), file).toBe(false)
    }
    const index = new Database(join(dataDir, 'search.db'), { readonly: true })
    try {
      index.exec("CREATE VIRTUAL TABLE temp.terms USING fts5vocab('main', 'docs_fts', 'row')")
      const terms = index.prepare('SELECT term FROM temp.terms').pluck().all() as string[]
      expect(terms).toContain('redacted')
      expect(terms.filter((t) => t.includes('sekrit') || t.includes('zq8v'))).toEqual([])
    } finally {
      index.close()
    }
  })
})
