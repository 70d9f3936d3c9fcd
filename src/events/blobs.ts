import { createHash } from 'node:crypto'
import type Database from 'better-sqlite3'

/**
 * Content-addressed text the log refers to by hash (schema migration 12):
 * what a model request was compiled from — the system prompt, the tool
 * schemas — stored once however many steps use it. A blob is written before
 * the event that names it commits, so a committed event never names a
 * missing blob (an orphan a crash leaves between the two is harmless).
 * Blobs are immutable like the events: the hash is the key.
 */

/** The key of a blob: sha256 of its UTF-8 bytes, hex. */
export function blobHash(content: string): string {
  return createHash('sha256').update(content).digest('hex')
}

export class BlobStore {
  /** content → hash of the last few put: a step repeats the previous step's system prompt and tools */
  private readonly recent = new Map<string, string>()
  private readonly insert: Database.Statement
  private readonly select: Database.Statement

  constructor(db: Database.Database) {
    this.insert = db.prepare('INSERT INTO blobs (hash, content) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING')
    this.select = db.prepare('SELECT content FROM blobs WHERE hash = ?').pluck()
  }

  /** Stores `content` (once) and returns its hash. */
  put(content: string): string {
    const known = this.recent.get(content)
    if (known) return known
    const hash = blobHash(content)
    this.insert.run(hash, content)
    this.recent.set(content, hash)
    if (this.recent.size > 16) this.recent.delete(this.recent.keys().next().value as string)
    return hash
  }

  get(hash: string): string | undefined {
    return (this.select.get(hash) as string | undefined) ?? undefined
  }
}
