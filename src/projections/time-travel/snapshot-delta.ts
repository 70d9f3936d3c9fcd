import { createHash } from 'node:crypto'
import { deflateRawSync } from 'node:zlib'
import type { StoredEvent } from '../../events/envelope.js'
import { inflateRow } from '../../events/schema.js'
import { apply, evolve } from '../fold/evolve.js'
import { rekey } from '../fold/fold.js'
import type { Message, Part, Session, SessionView } from '../fold/model.js'

/**
 * The rows of the snapshot cache behind time travel, on either engine
 * (SQLite's snapshots.ts, PostgreSQL's src/projections/postgres/snapshots.ts):
 * a derived table, never the source of truth. Each row is a *delta*: the
 * session object plus every message and part that the session's events with
 * base_version < version <= version changed, with their values right after
 * `version`. The rows of a session chain from base 0 (empty view, or for a
 * fork the inherited view) upwards; merging the chain up to row r and folding
 * the events after it gives the state at any later event.
 *
 * Deltas rather than full copies keep the table linear in the log: a full
 * view every K events would grow with the square of the session's length.
 * Rows are never updated (the log is immutable, so a row stays true); a row
 * written by an older evolve is recognised by `format` and dropped.
 *
 * A part still streaming when a row is written appears in several rows; its
 * streamed string (a text's `text`, a tool's `rawInput`) is then stored as
 * `[prefixLength, part-with-only-the-new-suffix]`, so a long part costs its
 * length once, not once per row it spans.
 *
 * A row's JSON over COMPRESS_FROM bytes is deflated: rows repeat keys, ids
 * and text, and deflate shrinks them several times over. Small rows stay
 * plain JSON, where deflate would save little.
 */
const COMPRESS_FROM = 4096

/** Changes when the projection code changes, so a snapshot from older code is never used. */
export const SNAPSHOT_FORMAT = createHash('sha256')
  .update(`delta-2\n${evolve.toString()}\n${apply.toString()}\n${rekey.toString()}`)
  .digest('hex')
  .slice(0, 16)

export interface ChainRow {
  readonly version: number
  readonly seq: number
  readonly baseVersion: number
}

/** A row as stored: its JSON, deflated (a Buffer) when large. */
export interface SnapshotRow extends ChainRow {
  readonly data: string | Buffer
}

/** A part as a row stores it: whole, or as the suffix of its streamed string after `prefixLength` units. */
type StoredPart = Part | readonly [prefixLength: number, part: Part]

interface Delta {
  readonly session: Session
  readonly messages: readonly Message[]
  readonly parts: readonly StoredPart[]
}

type Streamed = 'text' | 'rawInput'
function streamed(part: Part): Streamed | undefined {
  return part.type === 'text' || part.type === 'reasoning' ? 'text' : part.type === 'tool' ? 'rawInput' : undefined
}
const field = (part: Part, name: Streamed): string => (part as unknown as Record<Streamed, string>)[name]

/**
 * Merges the unbroken chain of `rows` (ascending versions) into `view` (in
 * place) and returns the last row used, or undefined when there is none. A
 * gap (a row whose base is not the previous row) or a row that cannot be
 * read ends the chain: what follows is folded from the log instead.
 */
export function mergeChain(view: SessionView, rows: Iterable<SnapshotRow>): ChainRow | undefined {
  let last: ChainRow | undefined
  for (const row of rows) {
    if (row.baseVersion !== (last?.version ?? 0)) break
    const delta = decode(row.data)
    if (!delta) break
    const parts = delta.parts.map((p) =>
      Array.isArray(p) ? appended(view, p as readonly [number, Part]) : (p as Part),
    )
    if (parts.includes(undefined)) break // a suffix that does not fit: treat as the chain's end
    view.session = delta.session
    for (const m of delta.messages) view.messages.set(m.id, m)
    for (const p of parts as Part[]) view.parts.set(p.id, p)
    last = { version: row.version, seq: row.seq, baseVersion: row.baseVersion }
  }
  return last
}

/**
 * Folds one session's own events into `view` and, when `every` > 0, says
 * which rows to record: every `every` events past `base`, the entities
 * changed since. The storage is the engine's; the rows are the same.
 */
export class DeltaRecorder {
  private readonly changed = { messages: new Set<string>(), parts: new Set<string>() }
  /** the changed parts' values at `base` (for storing only what a streamed string grew by) */
  private readonly prior = new Map<string, Part>()

  constructor(
    readonly view: SessionView,
    /** the version of the chain's last row (0: none) */
    public base: number,
    private readonly every: number,
  ) {}

  /** Folds `event`; the row to record when one falls due. */
  fold(event: StoredEvent): SnapshotRow | undefined {
    const changes = evolve(this.view, event)
    if (this.every > 0) {
      for (const p of changes.parts ?? []) {
        const before = this.view.parts.get(p.id)
        if (!this.changed.parts.has(p.id) && before) this.prior.set(p.id, before)
        this.changed.parts.add(p.id)
      }
      for (const m of changes.messages ?? []) this.changed.messages.add(m.id)
    }
    apply(this.view, changes)
    if (this.every <= 0 || event.version - this.base < this.every) return undefined
    const row = { version: event.version, seq: event.seq, baseVersion: this.base, data: this.encode() }
    this.base = event.version
    this.changed.messages.clear()
    this.changed.parts.clear()
    this.prior.clear()
    return row
  }

  private encode(): string | Buffer {
    const delta: Delta = {
      session: this.view.session as Session,
      messages: [...this.changed.messages].map((id) => this.view.messages.get(id) as Message),
      parts: [...this.changed.parts].map((id) => storedPart(this.view.parts.get(id) as Part, this.prior.get(id))),
    }
    const json = JSON.stringify(delta)
    return json.length < COMPRESS_FROM ? json : deflateRawSync(json)
  }
}

function decode(data: string | Buffer): Delta | undefined {
  try {
    return JSON.parse(typeof data === 'string' ? data : inflateRow(data)) as Delta
  } catch {
    return undefined
  }
}

function storedPart(part: Part, before: Part | undefined): StoredPart {
  const name = streamed(part)
  if (!name || !before || before.type !== part.type) return part
  const was = field(before, name)
  const now = field(part, name)
  if (was.length === 0 || !now.startsWith(was)) return part
  return [was.length, Object.assign({}, part, { [name]: now.slice(was.length) })]
}

function appended(view: SessionView, [prefixLength, part]: readonly [number, Part]): Part | undefined {
  const name = streamed(part)
  const before = view.parts.get(part.id)
  if (!name || !before || before.type !== part.type || field(before, name).length !== prefixLength) return undefined
  return Object.assign({}, part, { [name]: field(before, name) + field(part, name) }) as Part
}
