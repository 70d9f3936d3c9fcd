import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { createIndexer, openLogSource } from './indexer.js'
import { openIndexFile, readPosition } from './sqlite-index.js'

/**
 * `chronicle rebuild` and `verify` for the search index (docs/SEARCH.md),
 * with the server stopped: the index deleted and built again from the log;
 * or a fresh one built beside it, in a temporary file, up to the stored
 * one's position, and the two compared document by document — with FTS5's
 * own check that its index agrees with the documents it holds.
 */

export interface IndexRebuildReport {
  readonly events: number
  readonly documents: number
  readonly ms: number
  /** of which merging the full-text index into one segment at the end */
  readonly optimizeMs: number
}

/** Seqs read and applied per transaction when building from scratch. */
const BUILD_PAGE = 32_768

export function rebuildIndex(source: string, path: string): IndexRebuildReport {
  const started = performance.now()
  for (const file of [path, `${path}-wal`, `${path}-shm`]) rmSync(file, { force: true })
  const index = openIndexFile(path)
  const log = openLogSource(source)
  try {
    const events = createIndexer(index, log, BUILD_PAGE).catchUp()
    const documents = index.prepare('SELECT count(*) FROM docs').pluck().get() as number
    // one segment per term instead of one per transaction: what a query walks (the live index merges as it goes)
    const optimizing = performance.now()
    index.prepare("INSERT INTO docs_fts (docs_fts) VALUES ('optimize')").run()
    index.pragma('wal_checkpoint(TRUNCATE)')
    const done = performance.now()
    return { events, documents, ms: done - started, optimizeMs: done - optimizing }
  } finally {
    log.close()
    index.close()
  }
}

export interface IndexVerifyReport {
  /** false: there is no index (it is built when the server starts) */
  readonly present: boolean
  /**
   * the index was built from another log, or a longer one (a restored backup, a tail lost with the machine's
   * power): not compared — the server empties it and builds it again when it starts
   */
  readonly stale?: true
  /** the last seq the stored index has read, and the log's head */
  readonly position: number
  readonly head: number
  readonly documents: number
  /** each document or session that differs from a fresh index of the log up to the position (at most 100) */
  readonly differences: readonly string[]
}

interface Dump {
  readonly sessions: Map<string, string>
  readonly docs: Map<string, string>
}

/** Every session and document of an index, keyed by session id (and key), as comparable text. */
export function dumpIndex(db: Database.Database): Dump {
  const sessions = new Map<string, string>()
  for (const row of db
    .prepare(
      'SELECT s.session_id, s.title, u.session_id AS up, s.archived FROM sessions s LEFT JOIN sessions u ON u.id = s.up ORDER BY s.id',
    )
    .raw()
    .all() as [string, string, string | null, number][])
    sessions.set(row[0], JSON.stringify(row.slice(1)))
  const docs = new Map<string, string>()
  for (const row of db
    .prepare(`
      SELECT s.session_id, d.key, d.id, d.kind, d.seq, d.event, d.at, d.by, d.by_id, d.tool, d.files, hex(d.marks), d.text
      FROM docs d JOIN sessions s ON s.id = d.session ORDER BY d.id`)
    .raw()
    .all() as unknown[][])
    docs.set(`${row[0]} ${row[1]}`, JSON.stringify(row.slice(2)))
  return { sessions, docs }
}

export function compare(kind: string, stored: Map<string, string>, fresh: Map<string, string>, out: string[]): void {
  for (const [key, value] of fresh) {
    const had = stored.get(key)
    if (had === undefined) out.push(`${kind} ${key}: missing from the index`)
    else if (had !== value) out.push(`${kind} ${key}: the index holds ${cut(had)}, the log gives ${cut(value)}`)
  }
  for (const key of stored.keys()) if (!fresh.has(key)) out.push(`${kind} ${key}: in the index, not in the log`)
}

const cut = (text: string) => (text.length > 160 ? `${text.slice(0, 159)}…` : text)

export function verifyIndex(source: string, path: string): IndexVerifyReport {
  const log = openLogSource(source)
  try {
    const head = log.head()
    if (!existsSync(path)) return { present: false, position: 0, head, documents: 0, differences: [] }
    const stored = new Database(path)
    const dir = mkdtempSync(join(tmpdir(), 'chronicle-search-verify-'))
    try {
      const differences: string[] = []
      const position = readPosition(stored)
      const documents = stored.prepare('SELECT count(*) FROM docs').pluck().get() as number
      if (position.seq > 0 && log.hashAt(position.seq) !== position.hash)
        return { present: true, stale: true, position: position.seq, head, documents, differences: [] }
      try {
        // rank 1: against the documents it indexes, not only its own structure
        stored.prepare("INSERT INTO docs_fts (docs_fts, rank) VALUES ('integrity-check', 1)").run()
      } catch (err) {
        differences.push(`the full-text index disagrees with its documents: ${(err as Error).message}`)
      }
      const fresh = openIndexFile(join(dir, 'search.db'))
      createIndexer(fresh, log, BUILD_PAGE).catchUp(position.seq)
      const a = dumpIndex(stored)
      const b = dumpIndex(fresh)
      fresh.close()
      compare('session', a.sessions, b.sessions, differences)
      compare('document', a.docs, b.docs, differences)
      return {
        present: true,
        position: position.seq,
        head,
        documents: a.docs.size,
        differences: differences.slice(0, 100),
      }
    } finally {
      stored.close()
      rmSync(dir, { recursive: true, force: true })
    }
  } finally {
    log.close()
  }
}
