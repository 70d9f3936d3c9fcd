import type pg from 'pg'
import { ChronicleError } from '../../events/errors.js'
import { cursorOf, cursorText, type HitRow, hitOf, matcherOf } from './hits.js'
import { DEFAULT_LIMIT, MAX_LIMIT, type SearchHit } from './port.js'
import { indexWords, storable } from './postgres-index.js'
import type { Filter, SearchQuery, Term } from './query.js'
import type { IndexQueryOptions } from './sqlite-query.js'

/**
 * A parsed query against PostgreSQL's index (postgres-index.ts), finding
 * what SQLite's finds (sqlite-query.ts): the words as a `tsquery` over each
 * document's words — a term's words in a row (`<->`), the last one a prefix
 * when asked — and a term typed with punctuation also as typed (`strpos`
 * over the lower-cased text). A GIN index cannot give its matches newest
 * first, so a word in half the documents would have them all read and
 * sorted for a page of twenty: newest first asks the newest 8,192 documents
 * first, then four times as many below them, and so on, until the page is
 * full. A common word fills it in the first window; a rare one has few
 * matches anywhere. What costs most is a phrase of two common words that
 * rarely follow each other: each window's documents with both words have
 * their positions checked.
 */

type Queryable = Pick<pg.ClientBase, 'query'>

/** Words in a row as `tsquery` text (`<->`), the last a prefix when asked; undefined when none survives folding. */
function inARow(words: readonly string[], prefix: boolean): string | undefined {
  if (words.length === 0) return undefined
  const last = words.length - 1
  return `(${words.map((w, i) => `'${w}'${prefix && i === last ? ':*' : ''}`).join(' <-> ')})`
}

const termQuery = (term: Term) => inARow(term.words.flatMap(indexWords), term.prefix)

/** A path given to file: as tsquery text over the paths: its words in a row, a prefix with `*`. */
const pathQuery = (path: string) => inARow(indexWords(path), path.endsWith('*'))

/** Lower-case as the index compares it (ASCII only); undefined when that would not compare as typed. */
function asciiLower(text: string): string | undefined {
  return /^[\x20-\x7e\s]*$/.test(text) ? text.toLowerCase() : undefined
}

/** The first window newest first reads, and how much larger each next one is. */
const FIRST_WINDOW = 8192
const GROWTH = 4

class Sql {
  readonly where: string[] = []
  readonly args: unknown[] = []
  /** a placeholder for `value` (a NUL in it, which PostgreSQL's text refuses, as the index stores one) */
  arg(value: unknown): string {
    this.args.push(
      typeof value === 'string'
        ? storable(value)
        : Array.isArray(value)
          ? value.map((v) => (typeof v === 'string' ? storable(v) : v))
          : value,
    )
    return `$${this.args.length}`
  }
}

export async function queryPostgresIndex(
  db: Queryable,
  query: SearchQuery,
  options: IndexQueryOptions = {},
): Promise<{ hits: SearchHit[]; cursor?: string }> {
  const limit = Math.min(Math.max(options.limit ?? DEFAULT_LIMIT, 1), MAX_LIMIT)
  const cursor = cursorOf(options.cursor)
  const sql = new Sql()
  const positive = query.terms.map(termQuery).filter((q) => q !== undefined)
  const negative = query.excluded.map(termQuery).filter((q) => q !== undefined)
  /** the tsquery's placeholder, when the query has words to find */
  let match: string | undefined
  if (positive.length > 0) {
    const words = negative.length > 0 ? `${positive.join(' & ')} & !(${negative.join(' | ')})` : positive.join(' & ')
    match = sql.arg(words)
    sql.where.push(`d.words @@ ${match}::tsquery`)
  } else if (negative.length > 0) sql.where.push(`NOT d.words @@ ${sql.arg(negative.join(' | '))}::tsquery`)
  for (const term of query.terms) {
    const literal = term.literal === undefined ? undefined : asciiLower(term.literal)
    if (literal !== undefined) sql.where.push(`strpos(lower(d.text), ${sql.arg(literal)}) > 0`)
  }
  const anyPath = query.file.any.map(pathQuery).filter((q) => q !== undefined)
  if (anyPath.length > 0) sql.where.push(`d.paths @@ ${sql.arg(anyPath.join(' | '))}::tsquery`)
  if (query.file.any.length > 0) sql.where.push(`(${query.file.any.map((p) => pathMatch(sql, p)).join(' OR ')})`)
  const nonePath = query.file.none.map(pathQuery).filter((q) => q !== undefined)
  if (nonePath.length > 0) sql.where.push(`NOT d.paths @@ ${sql.arg(nonePath.join(' | '))}::tsquery`)
  for (const path of query.file.none) sql.where.push(`NOT ${pathMatch(sql, path)}`)
  if (query.session.any.length > 0)
    sql.where.push(
      `d.session IN (SELECT id FROM search_sessions WHERE session_id = ANY(${sql.arg(query.session.any)}::text[]))`,
    )
  if (query.session.none.length > 0) sql.where.push(`s.session_id <> ALL(${sql.arg(query.session.none)}::text[])`)
  inList(sql, 'd.kind', query.type)
  inList(sql, 'd.tool', query.tool)
  if (query.by.any.length > 0)
    sql.where.push(
      `(lower(d.by) = ANY(${sql.arg(query.by.any.map((b) => b.toLowerCase()))}::text[]) OR d.by_id = ANY(${sql.arg(query.by.any)}::text[]))`,
    )
  if (query.by.none.length > 0)
    sql.where.push(
      `NOT (lower(d.by) = ANY(${sql.arg(query.by.none.map((b) => b.toLowerCase()))}::text[]) OR coalesce(d.by_id = ANY(${sql.arg(query.by.none)}::text[]), false))`,
    )
  if (query.after !== undefined) sql.where.push(`d.at >= ${sql.arg(query.after)}`)
  if (query.before !== undefined) sql.where.push(`d.at < ${sql.arg(query.before)}`)
  if (!options.archived) sql.where.push('NOT s.archived')
  if (options.scope) sql.where.push(`d.session = ANY(${sql.arg(await reach(db, options.scope))}::integer[])`)

  const columns = 'd.id, s.session_id, s.title, d.key, d.kind, d.seq, d.event, d.at, d.by, d.tool, d.marks, d.text'
  const from = 'FROM search_docs d JOIN search_sessions s ON s.id = d.session'
  const run = async (where: readonly string[], tail: string, args: unknown[]) => {
    try {
      return (
        await db.query<HitRow & { id: number }>(
          `SELECT ${columns} ${from} WHERE ${where.join(' AND ') || 'true'} ${tail}`,
          args,
        )
      ).rows
    } catch (err) {
      if ((err as { code?: string }).code?.startsWith('42') || (err as { code?: string }).code === '22023')
        throw new ChronicleError('BAD_QUERY', `the index cannot run this query: ${(err as Error).message}`, {
          position: 0,
        })
      throw err
    }
  }

  const matcher = matcherOf(query)
  if (options.order === 'relevance' && match !== undefined) {
    const offset = cursor.offset ?? 0
    // divided by the document's length: the shortest document with the words ranks first, as with bm25
    const rank = `ts_rank(d.words, ${match}::tsquery, 2)`
    const rows = await run(sql.where, `ORDER BY ${rank} DESC, d.id DESC LIMIT ${limit + 1} OFFSET ${offset}`, sql.args)
    const page = rows.slice(0, limit)
    return {
      hits: page.map((r) => hitOf(r, matcher)),
      ...(rows.length > limit && { cursor: cursorText({ offset: offset + limit }) }),
    }
  }
  // newest first: below the cursor (or the newest document), a window at a time while the page is not full
  const rows: (HitRow & { id: number })[] = []
  let top =
    cursor.id ??
    Number(
      (await db.query<{ next: number }>('SELECT next_doc AS next FROM search_meta WHERE id = 1')).rows[0]?.next ?? 1,
    )
  // Below the first window, with words to find, `d.id + 0`: ordered by an expression no index gives, the
  // plan is the GIN index's matches, sorted. Ordered by `d.id`, the planner may walk the window backwards
  // testing each document's words, betting that matches are spread evenly: a phrase of two common words
  // that rarely follow each other took 450 ms that way on 73,000 documents (bench/search-postgres.ts).
  // The first window is small enough for that walk, and it is the fastest way to a common word's page.
  for (let window = FIRST_WINDOW; top > 1 && rows.length <= limit; window *= GROWTH) {
    const newest = match === undefined || window === FIRST_WINDOW ? 'd.id DESC' : '(d.id + 0) DESC'
    const floor = match === undefined ? 0 : Math.max(top - window, 0)
    const below = [...sql.where, `d.id < ${top}`, ...(floor > 0 ? [`d.id >= ${floor}`] : [])]
    rows.push(...(await run(below, `ORDER BY ${newest} LIMIT ${limit + 1 - rows.length}`, sql.args)))
    top = floor
  }
  const page = rows.slice(0, limit)
  const last = page.at(-1)
  return {
    hits: page.map((r) => hitOf(r, matcher)),
    ...(rows.length > limit && last && { cursor: cursorText({ id: last.id }) }),
  }
}

/** A path given to file:, at the end of a path the document names (after a `/`), or a prefix with `*`. */
function pathMatch(sql: Sql, path: string): string {
  const lines = `(E'\\n' || d.files || E'\\n')`
  if (path.endsWith('*')) {
    const stem = path.replace(/\*+$/, '')
    return `(strpos(${lines}, ${sql.arg(`\n${stem}`)}) > 0 OR strpos(${lines}, ${sql.arg(`/${stem}`)}) > 0)`
  }
  return `(strpos(${lines}, ${sql.arg(`\n${path}\n`)}) > 0 OR strpos(${lines}, ${sql.arg(`/${path}\n`)}) > 0)`
}

function inList<T extends string>(sql: Sql, column: string, filter: Filter<T>): void {
  if (filter.any.length === 1) sql.where.push(`${column} = ${sql.arg(filter.any[0])}`)
  else if (filter.any.length > 1) sql.where.push(`${column} = ANY(${sql.arg(filter.any)}::text[])`)
  if (filter.none.length > 0) sql.where.push(`coalesce(${column} <> ALL(${sql.arg(filter.none)}::text[]), true)`)
}

/** The index's ids of these sessions, their forks and sub-agents' sessions, and theirs. */
async function reach(db: Queryable, sessions: readonly string[]): Promise<number[]> {
  const { rows } = await db.query<{ id: number }>(
    `WITH RECURSIVE reach (id) AS (
       SELECT id FROM search_sessions WHERE session_id = ANY($1::text[])
       UNION SELECT c.id FROM search_sessions c JOIN reach r ON c.up = r.id
     ) SELECT id FROM reach`,
    [sessions],
  )
  return rows.map((r) => r.id)
}
