import type { ChronicleSocket, EventFrame, Session, Subscription } from '../client/index.js'

/**
 * Where a session's model steps and workspace snapshots are in its log:
 * what "what the model saw" (`session.context {at: <step.started seq>}`) and
 * a message's diff (`session.diff {from, to}`) need, since the read model's
 * parts do not carry seqs. Read with a type-filtered subscription, so only
 * these events cross the wire; a fork's inherited ones come from its
 * ancestors, up to each fork point. Built on first use, then kept live.
 */

export const INDEX_TYPES = ['step.started', 'workspace.snapshotted'] as const

export interface StepEntry {
  readonly seq: number
  readonly step: number
  readonly messageId: string
  readonly partId: string
}

export interface SnapshotEntry {
  readonly seq: number
  readonly reason: string
  readonly messageId?: string
  readonly partId?: string
}

export class StepIndex {
  readonly steps: StepEntry[] = []
  readonly snapshots: SnapshotEntry[] = []
  private readonly seen = new Set<number>()

  add(frame: Pick<EventFrame, 'seq' | 'event'>): void {
    if (this.seen.has(frame.seq)) return
    this.seen.add(frame.seq)
    const d = frame.event.data
    if (frame.event.type === 'step.started') {
      insert(this.steps, {
        seq: frame.seq,
        step: Number(d.step),
        messageId: String(d.messageId),
        partId: String(d.partId),
      })
    } else if (frame.event.type === 'workspace.snapshotted') {
      insert(this.snapshots, {
        seq: frame.seq,
        reason: String(d.reason),
        ...(typeof d.messageId === 'string' && { messageId: d.messageId }),
        ...(typeof d.partId === 'string' && { partId: d.partId }),
      })
    }
  }

  /** The latest step started at or before `seq`. */
  stepAtOrBefore(seq: number): StepEntry | undefined {
    let found: StepEntry | undefined
    for (const s of this.steps) {
      if (s.seq > seq) break
      found = s
    }
    return found
  }

  stepOfPart(partId: string): StepEntry | undefined {
    return this.steps.find((s) => s.partId === partId)
  }

  /**
   * The seqs between which a message's tools changed the files: from the
   * snapshot before its first tool snapshot to its last one. Undefined when
   * its tools changed nothing the index has seen.
   */
  messageDiffRange(messageId: string): { from: number; to: number } | undefined {
    const own = this.snapshots.filter((s) => s.reason === 'tool' && s.messageId === messageId)
    const first = own[0]
    const last = own[own.length - 1]
    if (!first || !last) return undefined
    const before = this.snapshots.filter((s) => s.seq < first.seq)
    const from = before[before.length - 1]?.seq ?? first.seq - 1
    return { from, to: last.seq }
  }
}

function insert<T extends { seq: number }>(list: T[], entry: T): void {
  let i = list.length
  while (i > 0 && (list[i - 1] as T).seq > entry.seq) i--
  list.splice(i, 0, entry)
}

/**
 * Loads a session's index: its own entries live (the subscription stays open
 * until `close`), each ancestor's up to its fork point.
 */
export async function loadStepIndex(
  socket: ChronicleSocket,
  session: Pick<Session, 'id' | 'forkedFrom'>,
  getSession: (id: string) => Promise<Pick<Session, 'id' | 'forkedFrom'>>,
  onChange: () => void,
): Promise<{ index: StepIndex; close: () => void }> {
  const index = new StepIndex()
  const own = await socket.subscribe({ sessions: [session.id], after: 0, types: INDEX_TYPES }, (f) => {
    index.add(f)
    onChange()
  })
  const waits: Promise<unknown>[] = [own.caughtUp]
  const ancestors: Subscription[] = []
  let from = session.forkedFrom
  while (from) {
    const upTo = from.seq
    const sub = await socket.subscribe({ sessions: [from.sessionId], after: 0, types: INDEX_TYPES }, (f) => {
      if (f.seq <= upTo) index.add(f)
    })
    ancestors.push(sub)
    waits.push(sub.caughtUp.then(() => sub.close()))
    from = (await getSession(from.sessionId)).forkedFrom
  }
  await Promise.all(waits)
  onChange()
  return {
    index,
    close: () => {
      void own.close()
      for (const a of ancestors) void a.close()
    },
  }
}

/** The step index of one session, loaded on first use and kept live until `close`. */
export class StepIndexLoader {
  index: StepIndex | undefined
  private loading: Promise<StepIndex> | undefined
  private closer: (() => void) | undefined
  private closed = false

  constructor(
    private readonly socket: ChronicleSocket,
    private readonly sessionId: string,
    private readonly onChange: () => void,
  ) {}

  ensure(): Promise<StepIndex> {
    this.loading ??= this.load().catch((err: unknown) => {
      this.loading = undefined
      throw err
    })
    return this.loading
  }

  close(): void {
    this.closed = true
    this.closer?.()
  }

  private async load(): Promise<StepIndex> {
    const get = async (id: string) => (await this.socket.call('session.get', { session: id })).session
    const { index, close } = await loadStepIndex(this.socket, await get(this.sessionId), get, () => {
      if (this.index) this.onChange()
    })
    if (this.closed) close()
    this.closer = close
    this.index = index
    this.onChange()
    return index
  }
}
