import { ChronicleError } from '../../events/errors.js'
import type { DocKind } from './documents.js'
import { seqAt, unpackMarks } from './marks.js'
import type { SearchHit } from './port.js'
import type { SearchQuery, Term } from './query.js'

/**
 * What a hit shows of its document, the same for every engine: where the
 * query's terms occur in the text, the window around the first one with each
 * occurrence marked, and the event the first one came from.
 */

const SNIPPET_BEFORE = 60
const SNIPPET_CHARS = 220
const WORD_CHAR = '[\\p{L}\\p{N}]'

/** One regular expression for every positive term of the query (null: none, a filter-only query). */
export function matcherOf(query: SearchQuery): RegExp | null {
  const sources = query.terms.map(termSource)
  return sources.length === 0 ? null : new RegExp(sources.join('|'), 'giu')
}

function termSource(term: Term): string {
  if (term.literal !== undefined) return `${escapeRegExp(term.literal)}${term.prefix ? `${WORD_CHAR}*` : ''}`
  const body = term.words.join(`[^\\p{L}\\p{N}]+`)
  return `(?<!${WORD_CHAR})${body}${term.prefix ? `${WORD_CHAR}*` : `(?!${WORD_CHAR})`}`
}

function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&')
}

export interface Shown {
  readonly snippet: string
  readonly highlights: [number, number][]
  readonly firstSeq: number
}

export function show(text: string, marks: readonly number[], matcher: RegExp | null): Shown {
  const matches: [number, number][] = []
  if (matcher) {
    matcher.lastIndex = 0
    for (let m = matcher.exec(text); m !== null && matches.length < 1000; m = matcher.exec(text)) {
      if (m[0].length === 0) {
        matcher.lastIndex++
        continue
      }
      matches.push([m.index, m.index + m[0].length])
    }
  }
  const first = matches[0]?.[0] ?? 0
  let start = first <= SNIPPET_BEFORE ? 0 : first - SNIPPET_BEFORE
  if (start > 0) {
    const space = text.indexOf(' ', start)
    if (space >= 0 && space < first) start = space + 1
  }
  let end = Math.min(text.length, start + SNIPPET_CHARS)
  if (end < text.length) {
    const space = text.lastIndexOf(' ', end)
    if (space > first) end = space
  }
  const lead = start > 0 ? '…' : ''
  const snippet = `${lead}${text.slice(start, end)}${end < text.length ? '…' : ''}`
  const highlights: [number, number][] = []
  for (const [s, e] of matches) {
    if (s >= end) break
    if (s >= start) highlights.push([s - start + lead.length, Math.min(e, end) - start + lead.length])
  }
  // the event whose text completed the first match: from there on the state holds it whole
  const firstEnd = matches[0]?.[1]
  return { snippet, highlights, firstSeq: seqAt(marks, firstEnd === undefined ? 0 : firstEnd - 1) }
}

/** A document as an engine's query returns it. */
export interface HitRow {
  id: number
  session_id: string
  title: string
  key: string
  kind: DocKind
  seq: number
  event: string
  at: number
  by: string
  tool: string | null
  marks: Buffer
  text: string
}

/** A document found, as a hit: its snippet around the first match of the query's terms. */
export function hitOf(row: HitRow, matcher: RegExp | null): SearchHit {
  const shown = show(row.text, unpackMarks(row.marks), matcher)
  return {
    session: row.session_id,
    title: row.title,
    seq: row.seq,
    event: row.event,
    firstSeq: shown.firstSeq,
    type: row.kind,
    key: row.key,
    by: row.by,
    at: new Date(row.at).toISOString(),
    ...(row.tool !== null && { tool: row.tool }),
    snippet: shown.snippet,
    highlights: shown.highlights,
  }
}

/** Where the next page starts: below a document id (newest first), or past an offset (by relevance). */
export interface Cursor {
  readonly id?: number
  readonly offset?: number
}

export function cursorOf(text: string | undefined): Cursor {
  if (text === undefined) return {}
  try {
    const parsed = JSON.parse(Buffer.from(text, 'base64url').toString()) as unknown
    if (typeof parsed === 'object' && parsed !== null) {
      const { id, offset } = parsed as Cursor
      if (Number.isInteger(id) || Number.isInteger(offset)) return parsed as Cursor
    }
  } catch {}
  throw new ChronicleError('BAD_REQUEST', 'a search cursor this server did not give')
}

export const cursorText = (cursor: Cursor) => Buffer.from(JSON.stringify(cursor)).toString('base64url')
