import pg from 'pg'
import { expect } from 'vitest'
import { onPostgres } from '../support/postgres-servers.js'
import { usePostgres } from '../support/use-postgres.js'
import { describeHiddenSecret, FORMS } from './search-secrets-contract.js'

/** The hidden secret on PostgreSQL: every column of the index's tables as text, its words and paths among them. */
describeHiddenSecret('PostgreSQL', onPostgres(usePostgres()), async (server) => {
  const db = new pg.Client({ connectionString: server.chronicle.config.store.url as string })
  await db.connect()
  try {
    const { rows } = await db.query<{ row: string }>(
      `SELECT d::text AS row FROM search_docs d UNION ALL SELECT s::text FROM search_sessions s`,
    )
    expect(rows.length).toBeGreaterThan(0)
    expect(rows.some((r) => r.row.includes('[redacted:CHRONICLE_TOKEN]'))).toBe(true)
    for (const { row } of rows) for (const form of FORMS) expect(row.includes(form), row).toBe(false)
    const words = (
      await db.query<{ w: string }>('SELECT DISTINCT unnest(tsvector_to_array(words)) AS w FROM search_docs')
    ).rows
    expect(words.map((r) => r.w)).toContain('redacted')
    expect(words.filter((r) => r.w.includes('sekrit') || r.w.includes('zq8v'))).toEqual([])
  } finally {
    await db.end()
  }
})
