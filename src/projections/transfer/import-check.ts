import { z } from 'zod'
import { ChronicleEvent, CURRENT_SCHEMA_VERSION, EVENT_TYPES } from '../../events/catalogue.js'
import { blobHash } from '../../events/blobs.js'
import { eventHash } from '../../events/chain.js'
import { EventMeta, type StoredEvent } from '../../events/envelope.js'
import { ChronicleError, isChronicleError } from '../../events/errors.js'
import { apply, evolve } from '../fold/evolve.js'
import { type EventReader, foldFrom, type InheritFn, rekey } from '../fold/fold.js'
import { emptyView, type SessionView } from '../fold/model.js'

/**
 * The checks an import file passes before anything of it is appended
 * (docs/TIME-TRAVEL.md "Export and import"). A file is untrusted input: every
 * line is parsed and checked, and each session's events are folded with the
 * real `evolve` in memory, so the file is accepted whole or not at all. A
 * failure is IMPORT_INVALID naming the line and the reason.
 *
 * - line 1 (the first non-blank line) is the header, in a supported format;
 *   no other header follows;
 * - every other line is an event with its envelope, and `{type, data}`
 *   matches the catalogue;
 * - seqs increase strictly through the file; each session's versions run
 *   1, 2, 3…; its first event is session.created or session.forked, and
 *   neither appears later;
 * - a fork's `from` is an earlier line of the file, in the history of the
 *   session it names (its own events, or a prefix it inherited);
 * - what evolve enforces (an event naming an unknown part, message or input
 *   is CORRUPT_EVENT there), and what it does not: an entity id is created
 *   once (message, part, accepted input, pending permission request); a tool
 *   event names a part some tool.input.started or tool.called began; a tool
 *   call ends once (completed or failed); tool.called does not re-open an
 *   ended call; permission.replied answers a pending request; an approval
 *   removed exists; run events name the open run, and a run starts only when
 *   none is open (so each run.started has at most one run.finished).
 */

/** 2: every event line carries its chain hash, and the blobs its steps name follow as `{blob, content}` lines */
export const EXPORT_FORMAT = 2
/** formats this version reads: 1 (before the hash chain) has no hashes and no blobs to check */
const READABLE_FORMATS = new Set([1, 2])

const BlobLine = z.object({ blob: z.string().regex(/^[0-9a-f]{64}$/), content: z.string() })

const ExportHeader = z.object({
  chronicle: z.literal('session-export'),
  format: z.number().int(),
  sessionId: z.string().min(1),
})

const ExportLine = z.object({
  seq: z.number().int().positive(),
  sessionId: z.string().min(1).max(200),
  version: z.number().int().positive(),
  type: z.string(),
  schemaVersion: z.number().int().positive(),
  data: z.unknown(),
  meta: EventMeta,
  at: z.iso.datetime(),
  inherited: z.literal(true).optional(),
  /** the event's hash in its session's chain, hex (format 2) */
  hash: z
    .string()
    .regex(/^[0-9a-f]{32}$/)
    .optional(),
})

/** One checked event line: the event as the file had it (original ids and seq). */
export interface ImportLine {
  /** 1-based line number in the file */
  readonly line: number
  readonly seq: number
  readonly sessionId: string
  readonly version: number
  readonly event: ChronicleEvent
  readonly meta: EventMeta
  readonly at: string
}

export interface CheckedImport {
  /** the session the export was made of (the header's) */
  readonly exported: string
  /** the event lines, in file order */
  readonly lines: readonly ImportLine[]
  /** the sessions the file holds events of, in order of their first line (ancestors first) */
  readonly sessions: readonly string[]
  /** session ids named in event data that are not sessions of the file (a sub-agent's parent or child) */
  readonly references: readonly string[]
  /** the blobs the file carries, each checked against its hash */
  readonly blobs: readonly string[]
}

export function checkImport(jsonl: string): CheckedImport {
  const check = new ImportCheck()
  jsonl.split('\n').forEach((text, index) => {
    if (text.trim() !== '') check.line(index + 1, text)
  })
  return check.done()
}

interface SessionSoFar {
  readonly events: StoredEvent[]
  /** the session's state after its last line: the live fold */
  view: SessionView
  /** input ids accepted so far */
  readonly inputs: Set<string>
}

class ImportCheck {
  private header: { line: number; sessionId: string; format: number } | undefined
  /** each session's last hash in the file: its chain so far */
  private readonly chains = new Map<string, Buffer>()
  private readonly blobs = new Map<string, string>()
  private lastSeq = 0
  private readonly lines: ImportLine[] = []
  private readonly bySeq = new Map<number, ImportLine>()
  private readonly sessions = new Map<string, SessionSoFar>()
  private readonly named = new Set<string>()
  private readonly reader: EventReader = {
    iterateSession: (sessionId, opts) => this.eventsOf(sessionId, opts?.after, opts?.upTo),
    readSession: (sessionId, opts) =>
      this.eventsOf(sessionId, opts?.after, opts?.upTo).slice(0, opts?.limit ?? undefined),
  }

  line(n: number, text: string): void {
    const json = parseJson(n, text)
    const header = ExportHeader.safeParse(json)
    if (this.header === undefined) {
      if (!header.success)
        throw invalid(
          n,
          'the file does not start with an export header {"chronicle":"session-export","format":1,"sessionId":…}',
        )
      if (!READABLE_FORMATS.has(header.data.format))
        throw invalid(
          n,
          `export format ${header.data.format} is not supported (this version reads formats ${[...READABLE_FORMATS].join(', ')})`,
        )
      this.header = { line: n, sessionId: header.data.sessionId, format: header.data.format }
      return
    }
    if (header.success) throw invalid(n, 'a second export header: import one export at a time')
    if (this.header.format >= 2 && typeof json === 'object' && json !== null && 'blob' in json) {
      this.blob(n, json)
      return
    }
    const line = this.parse(n, json)
    if (this.header.format >= 2) this.chained(n, line, json as { data: unknown; meta: unknown; hash?: string })
    this.event(n, line)
  }

  /** A blob line: its content must have its hash. */
  private blob(n: number, json: object): void {
    const parsed = BlobLine.safeParse(json)
    if (!parsed.success) throw invalid(n, `not a blob line: ${z.prettifyError(parsed.error)}`)
    if (blobHash(parsed.data.content) !== parsed.data.blob)
      throw invalid(n, `blob ${parsed.data.blob} does not match its hash`)
    this.blobs.set(parsed.data.blob, parsed.data.content)
  }

  /** The line's hash continues its session's chain in the file, over the event exactly as exported. */
  private chained(n: number, line: ImportLine, raw: { data: unknown; meta: unknown; hash?: string }): void {
    if (raw.hash === undefined) throw invalid(n, 'the event carries no hash (export format 2 chains every event)')
    const hash = eventHash(this.chains.get(line.sessionId) ?? null, {
      seq: line.seq,
      sessionId: line.sessionId,
      version: line.version,
      type: line.event.type,
      schemaVersion: CURRENT_SCHEMA_VERSION,
      at: Date.parse(line.at),
      meta: JSON.stringify(raw.meta),
      data: JSON.stringify(raw.data),
    })
    if (hash.toString('hex') !== raw.hash)
      throw invalid(
        n,
        `the hash does not match: this event, or an earlier one of session ${line.sessionId}, was changed`,
      )
    this.chains.set(line.sessionId, hash)
  }

  done(): CheckedImport {
    if (this.header === undefined) throw invalid(1, 'the file is empty')
    const { line, sessionId } = this.header
    if (!this.sessions.has(sessionId))
      throw invalid(line, `the header names session ${sessionId}, but the file holds no event of it`)
    const references = [...this.named].filter((id) => !this.sessions.has(id))
    for (const { line: at, event } of this.lines) {
      if (event.type !== 'step.started' || !event.data.context || this.header.format < 2) continue
      const { system, tools, messages } = event.data.context
      for (const hash of [system, tools, ...(messages ? [messages] : [])])
        if (!this.blobs.has(hash)) throw invalid(at, `the step names blob ${hash}, which the file does not carry`)
    }
    return {
      exported: sessionId,
      lines: this.lines,
      sessions: [...this.sessions.keys()],
      references,
      blobs: [...this.blobs.values()],
    }
  }

  private parse(n: number, json: unknown): ImportLine {
    const envelope = ExportLine.safeParse(json)
    if (!envelope.success) throw invalid(n, `not an event line: ${z.prettifyError(envelope.error)}`)
    const { seq, sessionId, version, type, schemaVersion, data, meta, at } = envelope.data
    if (schemaVersion !== CURRENT_SCHEMA_VERSION)
      throw invalid(
        n,
        `schema version ${schemaVersion} is not supported (this version writes ${CURRENT_SCHEMA_VERSION})`,
      )
    if (!(EVENT_TYPES as readonly string[]).includes(type)) throw invalid(n, `unknown event type ${type}`)
    const event = ChronicleEvent.safeParse({ type, data })
    if (!event.success) throw invalid(n, `invalid ${type} data: ${z.prettifyError(event.error)}`)
    return { line: n, seq, sessionId, version, event: event.data, meta, at }
  }

  private event(n: number, line: ImportLine): void {
    const { seq, sessionId, version, event } = line
    if (seq <= this.lastSeq)
      throw invalid(n, `seq ${seq} does not follow seq ${this.lastSeq}: seqs increase through the file`)
    const known = this.sessions.get(sessionId)
    const expected = (known?.events.length ?? 0) + 1
    if (version !== expected) throw invalid(n, `session ${sessionId} jumps from version ${expected - 1} to ${version}`)
    const starts = event.type === 'session.created' || event.type === 'session.forked'
    if (!known && !starts)
      throw invalid(
        n,
        `session ${sessionId} begins with ${event.type}: a session's first event is session.created or session.forked`,
      )
    if (known && starts)
      throw invalid(n, `${event.type} can only start a session; session ${sessionId} has already started`)
    const stored = {
      seq,
      sessionId,
      version,
      type: event.type,
      schemaVersion: CURRENT_SCHEMA_VERSION,
      data: event.data,
      meta: line.meta,
      at: line.at,
    } as StoredEvent
    const session = known ?? { events: [], view: this.startView(n, stored), inputs: new Set<string>() }
    checkInvariants(n, session, stored)
    try {
      apply(session.view, evolve(session.view, stored))
    } catch (err) {
      if (isChronicleError(err)) throw invalid(n, err.message)
      throw err
    }
    session.events.push(stored)
    this.sessions.set(sessionId, session)
    this.lines.push(line)
    this.bySeq.set(seq, line)
    this.lastSeq = seq
    for (const id of sessionsNamed(event)) this.named.add(id)
  }

  /** A new session's view before its first event: empty, or for a fork its parent's state at the fork point. */
  private startView(n: number, first: StoredEvent): SessionView {
    if (first.type !== 'session.forked') return emptyView()
    const { sessionId, seq } = first.data.from
    if (!this.bySeq.has(seq)) throw invalid(n, `the fork point seq ${seq} is not an earlier line of the file`)
    if (!this.sessions.has(sessionId)) throw invalid(n, `forks session ${sessionId}, which the file holds no event of`)
    if (!this.inHistory(sessionId, seq))
      throw invalid(n, `the fork point seq ${seq} is not an event of session ${sessionId}'s history`)
    const inherit: InheritFn = (from) => foldFrom(this.reader, from.sessionId, from.seq, inherit)
    return rekey(inherit(first.data.from), first.sessionId)
  }

  /** Is `seq` one of the session's own events, or of the prefix it inherited (recursively)? */
  private inHistory(sessionId: string, seq: number): boolean {
    const events = this.sessions.get(sessionId)?.events ?? []
    if (events.some((e) => e.seq === seq)) return true
    const first = events[0]
    return (
      first?.type === 'session.forked' && seq <= first.data.from.seq && this.inHistory(first.data.from.sessionId, seq)
    )
  }

  private eventsOf(sessionId: string, after = 0, upTo = Number.MAX_SAFE_INTEGER): StoredEvent[] {
    return (this.sessions.get(sessionId)?.events ?? []).filter((e) => e.seq > after && e.seq <= upTo)
  }
}

/** The invariants evolve does not enforce, checked against the state before the event. */
function checkInvariants(n: number, so: SessionSoFar, e: StoredEvent): void {
  const { view } = so
  const session = view.session
  const fail = (reason: string) => invalid(n, `${e.type}: ${reason}`)
  const newPart = (partId: string) => {
    if (view.parts.has(partId)) throw fail(`part ${partId} already exists`)
  }
  const toolPart = (partId: string) => {
    const part = view.parts.get(partId)
    if (part?.type !== 'tool') throw fail(`no tool.input.started or tool.called began part ${partId}`)
    return part
  }
  switch (e.type) {
    case 'input.accepted':
      if (so.inputs.has(e.data.inputId)) throw fail(`input ${e.data.inputId} was already accepted`)
      so.inputs.add(e.data.inputId)
      return
    case 'input.delivered':
      if (!session?.inbox.some((i) => i.inputId === e.data.inputId))
        throw fail(`input ${e.data.inputId} is not an accepted, undelivered input`)
      if (view.messages.has(e.data.messageId)) throw fail(`message ${e.data.messageId} already exists`)
      for (const partId of e.data.partIds) newPart(partId)
      return
    case 'message.created':
      if (view.messages.has(e.data.messageId)) throw fail(`message ${e.data.messageId} already exists`)
      return
    case 'run.started':
      if (session?.run) throw fail(`run ${session.run.runId} is still open`)
      return
    case 'run.resumed':
    case 'run.cancel.requested':
    case 'run.finished':
      if (session?.run?.runId !== e.data.runId) {
        throw fail(`run ${e.data.runId} is not the open run (${session?.run ? session.run.runId : 'no run is open'})`)
      }
      return
    case 'step.started':
    case 'step.finished':
    case 'text.started':
    case 'reasoning.started':
    case 'tool.input.started':
      newPart(e.data.partId)
      return
    case 'tool.called': {
      const part = view.parts.get(e.data.partId)
      if (part && !(part.type === 'tool' && part.state === 'pending')) {
        throw fail(
          `part ${e.data.partId} is ${part.type === 'tool' ? `a tool call already ${part.state}` : `a ${part.type} part`}`,
        )
      }
      return
    }
    case 'tool.input.delta':
    case 'tool.progressed':
    case 'tool.network':
      toolPart(e.data.partId)
      return
    case 'tool.completed':
    case 'tool.failed': {
      const part = toolPart(e.data.partId)
      if (part.state === 'completed' || part.state === 'error')
        throw fail(`tool call ${e.data.partId} already ended (${part.state})`)
      return
    }
    case 'context.pruned':
      for (const partId of e.data.partIds)
        if (toolPart(partId).state !== 'completed') throw fail(`tool call ${partId} has no output to prune`)
      return
    case 'permission.requested':
      if (session?.pendingPermissions.some((p) => p.requestId === e.data.requestId))
        throw fail(`request ${e.data.requestId} is already pending`)
      return
    case 'permission.replied':
      if (!session?.pendingPermissions.some((p) => p.requestId === e.data.requestId)) {
        throw fail(`request ${e.data.requestId} is not pending (never requested, or already answered)`)
      }
      return
    case 'permission.rule.removed':
      if (!session?.approvals.some((r) => r.ruleId === e.data.ruleId)) throw fail(`no approval ${e.data.ruleId}`)
      return
    case 'elicitation.requested':
      if (session?.pendingElicitations?.some((p) => p.elicitationId === e.data.elicitationId))
        throw fail(`elicitation ${e.data.elicitationId} is already pending`)
      return
    case 'elicitation.answered':
      if (!session?.pendingElicitations?.some((p) => p.elicitationId === e.data.elicitationId))
        throw fail(`elicitation ${e.data.elicitationId} is not pending (never requested, or already answered)`)
      return
    case 'subtask.started': {
      // The link to a child may be made again for the same call once the earlier child finished (evolve replaces it).
      const link = view.parts.get(`${e.data.partId}:subtask`)
      if (link?.type === 'subtask' && link.outcome === undefined)
        throw fail(`part ${e.data.partId}:subtask already links a running child`)
      return
    }
    default:
      return
  }
}

/** The session ids an event's data names (the import rewrites each of them). */
function sessionsNamed(event: ChronicleEvent): string[] {
  switch (event.type) {
    case 'session.created':
      return event.data.parent ? [event.data.parent.sessionId] : []
    case 'session.forked':
      return [event.data.from.sessionId]
    case 'subtask.started':
    case 'subtask.finished':
      return [event.data.childSessionId]
    case 'permission.requested':
    case 'elicitation.requested':
      return event.data.from ? [event.data.from.sessionId] : []
    default:
      return []
  }
}

function parseJson(n: number, text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    throw invalid(n, 'not JSON')
  }
}

function invalid(line: number, reason: string): ChronicleError {
  return new ChronicleError('IMPORT_INVALID', `import line ${line}: ${reason}; nothing was imported`, { line, reason })
}
