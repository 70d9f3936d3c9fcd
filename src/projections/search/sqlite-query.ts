import type Database from 'better-sqlite3'
import { ChronicleError } from '../../events/errors.js'
import { cursorOf, cursorText, type HitRow, hitOf, matcherOf } from './hits.js'
import { DEFAULT_LIMIT, MAX_LIMIT, type SearchHit } from './port.js'
import type { Filter, SearchQuery, Term } from './query.js'

/**
 * A parsed query against SQLite's index (sqlite-index.ts). The words go to
 * FTS5 as phrases (`"src auth ts"`, `"auth"*`); a term typed with
 * punctuation must also occur as typed (`instr` over the document's text,
 * case aside), so `src/auth.ts`, `--force` and `"rm -rf"` find what they say
 * and not every document with those words. Newest first walks the FTS index
 * backwards by rowid — documents are numbered as they are first indexed, in
 * seq order — and stops at the page's end; relevance ranks by bm25.
 */

export interface IndexQueryOptions {
  readonly scope?: readonly string[]
  readonly archived?: boolean
  readonly limit?: number
  readonly cursor?: string
  readonly order?: 'newest' | 'relevance'
}

/** FTS5's form of a term: a phrase of its words, the last one a prefix when asked. */
function phraseOf(term: Term): string {
  return `"${term.words.join(' ')}"${term.prefix ? '*' : ''}`
}

/** A path filter's FTS5 form, on the `files` column. */
function pathPhrase(path: string): string | undefined {
  const prefix = path.endsWith('*')
  const words = path.toLowerCase().match(/[\p{L}\p{N}]+/gu)
  return words ? `files : "${words.join(' ')}"${prefix ? '*' : ''}` : undefined
}

/** Lower-case as SQLite's lower() does (ASCII only); undefined when that would not compare as typed. */
function asciiLower(text: string): string | undefined {
  return /^[\x20-\x7e\s]*$/.test(text) ? text.toLowerCase() : undefined
}

export function queryIndex(
  db: Database.Database,
  query: SearchQuery,
  options: IndexQueryOptions = {},
): { hits: SearchHit[]; cursor?: string } {
  const limit = Math.min(Math.max(options.limit ?? DEFAULT_LIMIT, 1), MAX_LIMIT)
  const cursor = cursorOf(options.cursor)
  const where: string[] = []
  const args: unknown[] = []
  const positive = query.terms.map(phraseOf)
  for (const path of query.file.any) {
    const phrase = pathPhrase(path)
    if (phrase) positive.push(phrase)
  }
  const negative = [...query.excluded.map(phraseOf), ...query.file.none.map(pathPhrase).filter((p) => p !== undefined)]
  let match: string | undefined
  if (positive.length > 0) {
    match = positive.join(' AND ')
    if (negative.length > 0) match = `(${match}) NOT (${negative.join(' OR ')})`
  } else if (negative.length > 0) {
    where.push('d.id NOT IN (SELECT rowid FROM docs_fts WHERE docs_fts MATCH ?)')
    args.push(negative.join(' OR '))
  }
  for (const term of query.terms) {
    const literal = term.literal === undefined ? undefined : asciiLower(term.literal)
    if (literal === undefined) continue
    where.push('instr(lower(d.text), ?) > 0')
    args.push(literal)
  }
  if (query.file.any.length > 0) {
    where.push(`(${query.file.any.map(() => pathMatch).join(' OR ')})`)
    for (const path of query.file.any) args.push(...pathArgs(path))
  }
  for (const path of query.file.none) {
    where.push(`NOT ${pathMatch}`)
    args.push(...pathArgs(path))
  }
  inList(where, args, 's.session_id', query.session)
  inList(where, args, 'd.kind', query.type)
  inList(where, args, 'd.tool', query.tool)
  if (query.by.any.length > 0) {
    const names = JSON.stringify(query.by.any.map((b) => b.toLowerCase()))
    where.push('(lower(d.by) IN (SELECT value FROM json_each(?)) OR d.by_id IN (SELECT value FROM json_each(?)))')
    args.push(names, JSON.stringify(query.by.any))
  }
  if (query.by.none.length > 0) {
    where.push(
      'NOT (lower(d.by) IN (SELECT value FROM json_each(?)) OR coalesce(d.by_id IN (SELECT value FROM json_each(?)), 0))',
    )
    args.push(JSON.stringify(query.by.none.map((b) => b.toLowerCase())), JSON.stringify(query.by.none))
  }
  if (query.after !== undefined) {
    where.push('d.at >= ?')
    args.push(query.after)
  }
  if (query.before !== undefined) {
    where.push('d.at < ?')
    args.push(query.before)
  }
  if (!options.archived) where.push('s.archived = 0')
  if (options.scope) {
    where.push('d.session IN (SELECT value FROM json_each(?))')
    args.push(JSON.stringify(reach(db, options.scope)))
  }
  const relevance = options.order === 'relevance' && match !== undefined
  if (!relevance && cursor.id !== undefined) {
    where.push('d.id < ?')
    args.push(cursor.id)
  }
  const columns = 'd.id, s.session_id, s.title, d.key, d.kind, d.seq, d.event, d.at, d.by, d.tool, d.marks, d.text'
  const from =
    match === undefined
      ? 'FROM docs d JOIN sessions s ON s.id = d.session'
      : 'FROM docs_fts f JOIN docs d ON d.id = f.rowid JOIN sessions s ON s.id = d.session'
  const filters = [...(match === undefined ? [] : ['docs_fts MATCH ?']), ...where]
  const order = relevance
    ? 'ORDER BY f.rank, d.id DESC'
    : match === undefined
      ? 'ORDER BY d.id DESC'
      : 'ORDER BY f.rowid DESC'
  const offset = relevance ? (cursor.offset ?? 0) : 0
  const sql = `SELECT ${columns} ${from} ${filters.length > 0 ? `WHERE ${filters.join(' AND ')}` : ''} ${order} LIMIT ? OFFSET ?`
  let rows: HitRow[]
  try {
    rows = db.prepare(sql).all(...(match === undefined ? [] : [match]), ...args, limit + 1, offset) as HitRow[]
  } catch (err) {
    if (err instanceof Error && /fts5/i.test(err.message))
      throw new ChronicleError('BAD_QUERY', `the index cannot run this query: ${err.message}`, { position: 0 })
    throw err
  }
  const more = rows.length > limit
  const page = more ? rows.slice(0, limit) : rows
  const matcher = matcherOf(query)
  const hits = page.map((row) => hitOf(row, matcher))
  const last = page.at(-1)
  if (!more || !last) return { hits }
  return { hits, cursor: cursorText(relevance ? { offset: offset + limit } : { id: last.id }) }
}

/** A path given to file:, at the end of a path the document names (after a `/`), or a prefix with `*`. */
const pathMatch = `(instr(char(10) || d.files || char(10), ?) > 0 OR instr(char(10) || d.files || char(10), ?) > 0)`

function pathArgs(path: string): [string, string] {
  if (path.endsWith('*')) {
    const stem = path.replace(/\*+$/, '')
    return [`\n${stem}`, `/${stem}`]
  }
  return [`\n${path}\n`, `/${path}\n`]
}

function inList<T extends string>(where: string[], args: unknown[], column: string, filter: Filter<T>): void {
  if (filter.any.length === 1) {
    // one value: `=`, so an index on the column gives the documents newest first without a sort
    where.push(`${column} = ?`)
    args.push(filter.any[0])
  } else if (filter.any.length > 1) {
    where.push(`${column} IN (SELECT value FROM json_each(?))`)
    args.push(JSON.stringify(filter.any))
  }
  if (filter.none.length > 0) {
    where.push(`coalesce(${column} NOT IN (SELECT value FROM json_each(?)), 1)`)
    args.push(JSON.stringify(filter.none))
  }
}

/** The index's ids of these sessions, their forks and sub-agents' sessions, and theirs. */
function reach(db: Database.Database, sessions: readonly string[]): number[] {
  return db
    .prepare(`
      WITH RECURSIVE reach (id) AS (
        SELECT id FROM sessions WHERE session_id IN (SELECT value FROM json_each(?))
        UNION SELECT c.id FROM sessions c JOIN reach r ON c.up = r.id
      ) SELECT id FROM reach`)
    .pluck()
    .all(JSON.stringify(sessions)) as number[]
}
