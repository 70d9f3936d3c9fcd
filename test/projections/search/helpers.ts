import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type Database from 'better-sqlite3'
import type { ChronicleEvent } from '../../../src/events/catalogue.js'
import type { EventMeta } from '../../../src/events/envelope.js'
import type { EventStore } from '../../../src/events/store.js'
import { openStore } from '../../../src/projections/open.js'
import { createIndexer, openLogSource } from '../../../src/projections/search/indexer.js'
import { unpackMarks } from '../../../src/projections/search/marks.js'
import type { SearchHit } from '../../../src/projections/search/port.js'
import { parseQuery } from '../../../src/projections/search/query.js'
import { openIndexFile } from '../../../src/projections/search/sqlite-index.js'
import { type IndexQueryOptions, queryIndex } from '../../../src/projections/search/sqlite-query.js'

/** 2026-12-01T12:00:00Z: every event of a spec is committed at this time unless it says otherwise. */
export const T0 = Date.UTC(2026, 11, 1, 12, 0, 0)
export const model: EventMeta = { actor: 'model' }
export const runtime: EventMeta = { actor: 'runtime' }
export const alice: EventMeta = { actor: 'user', by: { id: 'tok_alice', name: 'alice' } }

/** A row of the index's documents as a spec states it. */
export interface DocRow {
  session: string
  key: string
  kind: string
  seq: number
  event: string
  by: string
  tool: string | null
  files: string
  marks: number[]
  text: string
}

/**
 * A real store on a temporary file and the real index beside it: events go in through the store, the indexer
 * reads them through its own read-only connection, as the server's worker does.
 */
export interface SearchFixture {
  readonly store: EventStore
  readonly dir: string
  readonly indexPath: string
  clock: number
  append(sessionId: string, events: ChronicleEvent[], meta?: EventMeta): number
  /** indexes up to the head; returns the position */
  index(): number
  docs(): DocRow[]
  search(query: string, options?: IndexQueryOptions): SearchHit[]
  page(query: string, options?: IndexQueryOptions): { hits: SearchHit[]; cursor?: string }
  indexDb(): Database.Database
  /** closes the index's connection: the next index() opens it again, as a restarted worker does */
  restart(): void
  close(): void
}

export function searchFixture(): SearchFixture {
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-search-'))
  const path = join(dir, 'chronicle.db')
  const store = openStore(path, { now: () => fixture.clock })
  const indexPath = join(dir, 'search.db')
  let db: Database.Database | undefined
  const open = () => {
    db ??= openIndexFile(indexPath)
    return db
  }
  const fixture: SearchFixture = {
    store,
    dir,
    indexPath,
    clock: T0,
    append(sessionId, events, meta = runtime) {
      const stored = store.append(sessionId, events, { meta })
      return (stored.at(-1) as { seq: number }).seq
    },
    index() {
      const log = openLogSource(path)
      try {
        return createIndexer(open(), log).catchUp()
      } finally {
        log.close()
      }
    },
    docs() {
      return (
        open()
          .prepare(
            'SELECT s.session_id AS session, d.key, d.kind, d.seq, d.event, d.by, d.tool, d.files, d.marks, d.text FROM docs d JOIN sessions s ON s.id = d.session ORDER BY d.id',
          )
          .all() as (Omit<DocRow, 'marks'> & { marks: Buffer })[]
      ).map((row) => ({ ...row, marks: unpackMarks(row.marks) }))
    },
    search(query, options) {
      return fixture.page(query, options).hits
    },
    page(query, options) {
      return queryIndex(open(), parseQuery(query, fixture.clock), options)
    },
    indexDb: open,
    restart() {
      db?.close()
      db = undefined
    },
    close() {
      db?.close()
      store.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
  return fixture
}

let counter = 0
/** An input with these parts, accepted. */
export function input(
  inputId: string,
  parts: ({ type: 'text'; text: string } | { type: 'file'; path?: string; filename?: string; url?: string })[],
): ChronicleEvent {
  counter++
  return {
    type: 'input.accepted',
    data: { inputId, parts, delivery: 'queue', noReply: false, digest: `d${counter}` },
  }
}

export const created = (title?: string): ChronicleEvent => ({
  type: 'session.created',
  data: { directory: '/work', agent: 'build', model: 'scripted:x', ...(title !== undefined && { title }) },
})

/** A streamed text (or reasoning) part: started, one delta per chunk, ended. */
export function streamed(kind: 'text' | 'reasoning', partId: string, chunks: string[]): ChronicleEvent[] {
  return [
    { type: `${kind}.started`, data: { messageId: 'msg_2', partId } } as ChronicleEvent,
    ...chunks.map((text) => ({ type: `${kind}.delta`, data: { partId, text } }) as ChronicleEvent),
    { type: `${kind}.ended`, data: { partId } } as ChronicleEvent,
  ]
}

export const assistant: ChronicleEvent = {
  type: 'message.created',
  data: { messageId: 'msg_2', role: 'assistant', agent: 'build', model: 'scripted:x' },
}

export function toolCall(partId: string, tool: string, input: unknown): ChronicleEvent {
  return { type: 'tool.called', data: { messageId: 'msg_2', partId, callId: `call_${partId}`, tool, input } }
}
