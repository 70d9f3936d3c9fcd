import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { expect } from 'vitest'
import { startServer } from '../http/helpers.js'
import { describeHiddenSecret, FORMS } from './search-secrets-contract.js'

/** The hidden secret on SQLite: its index file's raw bytes (and its WAL's), and FTS5's terms. */
describeHiddenSecret('SQLite', startServer, async (server) => {
  const { dataDir } = server.chronicle.config
  const files = ['search.db', 'search.db-wal'].map((n) => join(dataDir, n)).filter((f) => existsSync(f))
  expect(files).toContain(join(dataDir, 'search.db'))
  for (const file of files) {
    const bytes = readFileSync(file)
    for (const form of FORMS) expect(bytes.includes(form), file).toBe(false)
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
