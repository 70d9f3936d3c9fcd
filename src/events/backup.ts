import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import type Database from 'better-sqlite3'

/**
 * A consistent copy of the live store's file while it serves (docs/BACKUP.md).
 * The copy runs on a worker thread with a connection of its own: SQLite's
 * online backup copies every page in one step, inside one read transaction
 * — a snapshot of the log as of one commit (whole commits only). In WAL mode
 * a reader never blocks the writer, so the server's appends go on meanwhile
 * and its event loop is never held (better-sqlite3's own stepped backup on the
 * server's connection would run each step there). The worker then makes the
 * copy one self-contained file (no WAL) and reads its last seq and whole-log
 * digest (src/events/chain.ts) from the stored hashes. Checking every event
 * again is the restore's (`verify`), where and when it matters.
 *
 * The worker runs at a lower priority (nice 10), so on a busy machine the
 * server's requests come first and the backup takes longer, not the requests.
 *
 * The worker's code is a plain script (not a module of this tree) so that it
 * runs the same from the built package, under tsx and under the test runner.
 */

export interface DatabaseCopy {
  /** the last seq the copy holds */
  readonly seq: number
  /** the whole-log digest at that seq */
  readonly digest: string
  readonly events: number
  readonly pages: number
  /** copying the pages, then reading the copy's digest */
  readonly copyMs: number
  readonly checkMs: number
}

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
const { hash } = require('node:crypto')
const Database = require(workerData.sqlite)
// Linux keeps a nice value per thread: this one yields the cores to the server's own threads when they are busy
try { require('node:os').setPriority(0, 10) } catch {}
const started = performance.now()
const source = new Database(workerData.source, { readonly: true, fileMustExist: true })
source.pragma('busy_timeout = 5000')
source.backup(workerData.dest, { progress: () => 0x7fffffff }).then((progress) => {
  source.close()
  const copied = performance.now()
  const copy = new Database(workerData.dest, { fileMustExist: true })
  copy.pragma('journal_mode = DELETE')
  const chain = copy.prepare('SELECT from_seq FROM log_chain WHERE id = 1').pluck().get()
  const [seq, events] = copy.prepare('SELECT COALESCE(MAX(seq), 0), COUNT(*) FROM event_log').raw().get()
  // d(n) = sha256(d(n-1) ‖ hash(n)), d(0) empty: 32 + 16 bytes in one buffer, no allocation per event
  const chained = Buffer.alloc(48)
  let digest = Buffer.alloc(0)
  const hashes = copy.prepare('SELECT hash FROM event_log WHERE seq >= ? ORDER BY seq').pluck()
  for (const eventHash of hashes.iterate(chain === undefined ? 1 : chain)) {
    if (!eventHash) continue
    if (digest.length === 0) digest = hash('sha256', eventHash, 'buffer')
    else {
      digest.copy(chained, 0)
      eventHash.copy(chained, 32)
      digest = hash('sha256', chained, 'buffer')
    }
  }
  copy.close()
  parentPort.postMessage({
    seq, digest: digest.toString('hex'), events, pages: progress.totalPages,
    copyMs: Math.round(copied - started), checkMs: Math.round(performance.now() - copied),
  })
}, (err) => { throw err })
`

export function copyDatabase(db: Database.Database, dest: string): Promise<DatabaseCopy> {
  const sqlite = createRequire(import.meta.url).resolve('better-sqlite3')
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER, { eval: true, workerData: { sqlite, source: db.name, dest } })
    let answered = false
    worker.once('message', (copy: DatabaseCopy) => {
      answered = true
      resolve(copy)
    })
    worker.once('error', reject)
    worker.once('exit', (code) => {
      if (!answered) reject(new Error(`the backup worker exited (${code}) without a copy`))
    })
  })
}
