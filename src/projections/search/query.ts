import { ChronicleError } from '../../events/errors.js'
import { DOC_KINDS, type DocKind } from './documents.js'

/**
 * The search query language (docs/SEARCH.md "Queries"), parsed once for
 * every engine:
 *
 *   words            flaky test          every word, anywhere in the document
 *   "exact phrase"   "rm -rf build"      the words in this order, and as typed
 *   prefix*          auth*               a word starting so
 *   filters          session: tool: by: type: file: before: after:
 *   -excluded        -lorem -tool:bash   documents without it
 *
 * A term with punctuation (src/auth.ts, snake_case_name, --force) is a phrase
 * of its words that must also appear as typed (case aside). A malformed query
 * is BAD_QUERY with the offset where it failed (details.position), never a
 * server error.
 */

export interface Term {
  /** the words the term is made of: letters and digits, lower-cased */
  readonly words: readonly string[]
  /** the last word is a prefix */
  readonly prefix: boolean
  /** lower-cased, as typed, when it holds more than words and spaces: the document must contain it */
  readonly literal?: string
}

export interface Filter<T> {
  /** any of these (none given: no constraint) */
  readonly any: readonly T[]
  /** none of these */
  readonly none: readonly T[]
}

export interface SearchQuery {
  readonly terms: readonly Term[]
  readonly excluded: readonly Term[]
  readonly session: Filter<string>
  readonly tool: Filter<string>
  readonly by: Filter<string>
  readonly type: Filter<DocKind>
  readonly file: Filter<string>
  /** epoch ms: documents at or after `after`, before `before` */
  readonly after?: number
  readonly before?: number
}

export const MAX_QUERY_CHARS = 1000
const FILTERS = ['session', 'tool', 'by', 'type', 'file', 'before', 'after'] as const
type FilterName = (typeof FILTERS)[number]
const WORD = /[\p{L}\p{N}]+/gu
const ONLY_WORDS = /^[\p{L}\p{N}\s]*$/u

function bad(message: string, position: number, query: string): ChronicleError {
  return new ChronicleError('BAD_QUERY', `${message} (at character ${position + 1})`, { position, query })
}

interface Token {
  readonly text: string
  readonly position: number
  readonly quoted: boolean
  readonly negated: boolean
  readonly filter?: FilterName
}

/** The query's clauses: words, quoted phrases and `name:value` filters, each perhaps negated. */
function tokenize(query: string): Token[] {
  const out: Token[] = []
  let i = 0
  while (i < query.length) {
    if (/\s/.test(query[i] as string)) {
      i++
      continue
    }
    const start = i
    // `-x` excludes; `--force` is a word (a flag is searched as typed)
    const negated = query[i] === '-' && query[i + 1] !== '-'
    if (negated) {
      i++
      if (i >= query.length || /\s/.test(query[i] as string)) throw bad('a lone "-" excludes nothing', start, query)
    }
    let filter: FilterName | undefined
    const named = /^([a-z]+):/.exec(query.slice(i))
    if (named && (FILTERS as readonly string[]).includes(named[1] as string)) {
      filter = named[1] as FilterName
      i += named[0].length
      if (i >= query.length || /\s/.test(query[i] as string))
        throw bad(`${filter}: needs a value`, start + (negated ? 1 : 0), query)
    }
    if (query[i] === '"') {
      const close = query.indexOf('"', i + 1)
      if (close < 0) throw bad('this quote is never closed', i, query)
      const text = query.slice(i + 1, close)
      if (text.trim() === '') throw bad('an empty phrase', i, query)
      out.push({ text, position: start, quoted: true, negated, ...(filter && { filter }) })
      i = close + 1
      continue
    }
    let end = i
    while (end < query.length && !/\s/.test(query[end] as string)) {
      if (query[end] === '"') throw bad('a quote inside a word: put the whole phrase in quotes', end, query)
      end++
    }
    out.push({ text: query.slice(i, end), position: start, quoted: false, negated, ...(filter && { filter }) })
    i = end
  }
  return out
}

/** Parses a query; `now` (epoch ms) anchors relative dates such as `after:7d`. */
export function parseQuery(query: string, now = Date.now()): SearchQuery {
  if (query.length > MAX_QUERY_CHARS)
    throw bad(`a query is at most ${MAX_QUERY_CHARS} characters`, MAX_QUERY_CHARS, query)
  const terms: Term[] = []
  const excluded: Term[] = []
  const lists = {
    session: { any: [] as string[], none: [] as string[] },
    tool: { any: [] as string[], none: [] as string[] },
    by: { any: [] as string[], none: [] as string[] },
    type: { any: [] as DocKind[], none: [] as DocKind[] },
    file: { any: [] as string[], none: [] as string[] },
  }
  let after: number | undefined
  let before: number | undefined
  for (const token of tokenize(query)) {
    const { filter, text, position, negated } = token
    if (filter === undefined) {
      ;(negated ? excluded : terms).push(termOf(token, query))
      continue
    }
    if (filter === 'before' || filter === 'after') {
      if (negated)
        throw bad(`-${filter}: is not a filter: use ${filter === 'before' ? 'after' : 'before'}:`, position, query)
      const at = dateOf(text, now)
      if (at === undefined)
        throw bad(
          `${filter}: takes a date (2026-12-01), a time (2026-12-01T10:00Z) or an age (7d, 12h, 30m)`,
          position,
          query,
        )
      if (filter === 'after') after = Math.max(after ?? at, at)
      else before = Math.min(before ?? at, at)
      continue
    }
    if (filter === 'type') {
      const kind = text.toLowerCase()
      if (!(DOC_KINDS as readonly string[]).includes(kind))
        throw bad(`type: is one of ${DOC_KINDS.join(', ')}, not ${JSON.stringify(text)}`, position, query)
      lists.type[negated ? 'none' : 'any'].push(kind as DocKind)
      continue
    }
    if (filter === 'file' && /^\*+$/.test(text)) throw bad('file: needs a path, not only "*"', position, query)
    lists[filter][negated ? 'none' : 'any'].push(text)
  }
  if (after !== undefined && before !== undefined && after >= before)
    throw bad('after: is not before before:', 0, query)
  const filtered = Object.values(lists).some((l) => l.any.length > 0) || after !== undefined || before !== undefined
  if (terms.length === 0 && !filtered)
    throw bad(
      excluded.length > 0 || Object.values(lists).some((l) => l.none.length > 0)
        ? 'nothing to exclude from: add a word or a filter'
        : 'an empty query: give a word, a "phrase" or a filter',
      0,
      query,
    )
  return {
    terms,
    excluded,
    ...lists,
    ...(after !== undefined && { after }),
    ...(before !== undefined && { before }),
  }
}

function termOf(token: Token, query: string): Term {
  let text = token.text
  let prefix = false
  if (!token.quoted && text.endsWith('*')) {
    prefix = true
    text = text.replace(/\*+$/, '')
  }
  if (!token.quoted && text.includes('*'))
    throw bad('"*" marks a prefix: it goes at the end of a word', token.position + text.indexOf('*'), query)
  const words = (text.toLowerCase().match(WORD) ?? []) as string[]
  if (words.length === 0)
    throw bad(`${JSON.stringify(token.text)} has nothing to search for: no letters or digits`, token.position, query)
  const literal = ONLY_WORDS.test(text) ? undefined : text.trim().toLowerCase()
  return { words, prefix, ...(literal !== undefined && { literal }) }
}

const AGE = /^(\d{1,6})([dhm])$/
const DAY = /^\d{4}-\d{2}-\d{2}$/

/** A date (its midnight, UTC), an ISO time, or an age before `now`; undefined when it is none. */
function dateOf(text: string, now: number): number | undefined {
  const age = AGE.exec(text)
  if (age) return now - Number(age[1]) * { d: 86_400_000, h: 3_600_000, m: 60_000 }[age[2] as 'd' | 'h' | 'm']
  if (!DAY.test(text) && !/^\d{4}-\d{2}-\d{2}T/.test(text)) return undefined
  const at = Date.parse(DAY.test(text) ? `${text}T00:00:00Z` : text)
  return Number.isNaN(at) ? undefined : at
}
