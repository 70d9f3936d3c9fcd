import { isSystemStream } from '../../events/append-rules.js'
import type { EventType } from '../../events/catalogue.js'
import type { StoredEvent } from '../../events/envelope.js'

/**
 * What the search index holds, as a fold of the log (docs/SEARCH.md): the
 * documents one finds, each the text of one part or one fact, and the
 * sessions they belong to. `indexEvent` turns each event into the changes it
 * makes to the index; a store of the index (SQLite's file, PostgreSQL's
 * table) applies them. Text is indexed per part, not per delta: a streamed
 * text or reasoning part is one document when it ends, a tool call one
 * document when it is called and again, with its output, when it ends.
 *
 * The fold keeps one thing in memory: the text of the parts still streaming.
 * `replayFrom` says from which seq to read the log again to have it back
 * after a restart (the index stores it with its position).
 */

export const DOC_KINDS = ['input', 'text', 'reasoning', 'tool', 'permission', 'file', 'title'] as const
export type DocKind = (typeof DOC_KINDS)[number]

/** A document longer than this is cut there: the first 100,000 characters of a part are what one finds. */
export const MAX_DOC_CHARS = 100_000

export interface SearchDoc {
  readonly session: string
  /** the document's key in its session: a part id, an input id, a request id, `title`, `files@<seq>` */
  readonly key: string
  readonly kind: DocKind
  /** the event that completed it (the latest that changed it) and that event's type and time */
  readonly seq: number
  readonly event: string
  readonly at: string
  /** who: the principal's name (meta.by), else the actor (`model`, `tool`, `runtime`…) */
  readonly by: string
  readonly byId?: string
  readonly tool?: string
  /** file paths the document names (a tool's file arguments, attachments, changed paths) */
  readonly files: readonly string[]
  readonly text: string
  /** where each piece of the text came from: [seq, offset, seq, offset…], offsets ascending */
  readonly marks: readonly number[]
}

export type IndexOp =
  /** a session appeared: its parent (a sub-agent's) or the session it forked from, its title if it has one */
  | {
      readonly op: 'session'
      readonly session: string
      readonly title?: string
      readonly parent?: string
      readonly forkedFrom?: string
    }
  | { readonly op: 'archived'; readonly session: string; readonly archived: boolean }
  | { readonly op: 'put'; readonly doc: SearchDoc }
  /** more text for a document indexed before (a tool's output, a permission's reply); none there: nothing */
  | {
      readonly op: 'extend'
      readonly session: string
      readonly key: string
      readonly text: string
      readonly seq: number
      readonly event: string
      readonly at: string
      readonly by?: string
      readonly byId?: string
    }

interface OpenPart {
  readonly kind: 'text' | 'reasoning'
  readonly startSeq: number
  readonly by: string
  readonly byId: string | undefined
  readonly chunks: string[]
  length: number
  readonly marks: number[]
}

/** The fold's memory: the parts still streaming, by session and part id. */
export interface IndexerState {
  readonly open: Map<string, OpenPart>
}

export function initialIndexerState(): IndexerState {
  return { open: new Map() }
}

/** The seq to read the log from again after a restart to have the open parts back (none open: undefined). */
export function replayFrom(state: IndexerState): number | undefined {
  let min: number | undefined
  for (const part of state.open.values()) if (min === undefined || part.startSeq < min) min = part.startSeq
  return min
}

/** The event types that change the index: the only ones the indexer reads from the log (the switch below). */
export const INDEXED_TYPES: readonly EventType[] = [
  'session.created',
  'session.forked',
  'session.renamed',
  'session.archived',
  'session.unarchived',
  'input.accepted',
  'text.started',
  'text.delta',
  'text.ended',
  'reasoning.started',
  'reasoning.delta',
  'reasoning.ended',
  'tool.called',
  'tool.completed',
  'tool.failed',
  'permission.requested',
  'permission.replied',
  'workspace.snapshotted',
]

const NONE: readonly IndexOp[] = []

/** The index changes one event makes (in seq order; the state holds the parts still streaming). */
export function indexEvent(state: IndexerState, event: StoredEvent): readonly IndexOp[] {
  if (isSystemStream(event.sessionId)) return NONE
  const session = event.sessionId
  switch (event.type) {
    case 'session.created': {
      const { title, parent } = event.data
      const created: IndexOp = {
        op: 'session',
        session,
        ...(title !== undefined && { title }),
        ...(parent && { parent: parent.sessionId }),
      }
      return title === undefined ? [created] : [created, titleDoc(event, title)]
    }
    case 'session.forked': {
      const { title, from } = event.data
      const forked: IndexOp = {
        op: 'session',
        session,
        forkedFrom: from.sessionId,
        ...(title !== undefined && { title }),
      }
      return title === undefined ? [forked] : [forked, titleDoc(event, title)]
    }
    case 'session.renamed':
      return [titleDoc(event, event.data.title)]
    case 'session.archived':
      return [{ op: 'archived', session, archived: true }]
    case 'session.unarchived':
      return [{ op: 'archived', session, archived: false }]
    case 'input.accepted': {
      const texts: string[] = []
      const files: string[] = []
      for (const part of event.data.parts) {
        if (part.type === 'text') texts.push(part.text)
        else {
          const name = part.path ?? part.filename ?? (part.url?.startsWith('data:') ? undefined : part.url)
          if (name !== undefined) {
            files.push(name)
            texts.push(part.filename !== undefined && part.filename !== name ? `${name} ${part.filename}` : name)
          }
        }
      }
      return [put(event, event.data.inputId, 'input', texts.join('\n'), { files })]
    }
    case 'text.started':
    case 'reasoning.started':
      state.open.set(partKey(session, event.data.partId), {
        kind: event.type === 'text.started' ? 'text' : 'reasoning',
        startSeq: event.seq,
        ...who(event),
        chunks: [],
        length: 0,
        marks: [],
      })
      return NONE
    case 'text.delta':
    case 'reasoning.delta': {
      const part = state.open.get(partKey(session, event.data.partId))
      if (!part || part.length >= MAX_DOC_CHARS || event.data.text.length === 0) return NONE
      part.marks.push(event.seq, part.length)
      part.chunks.push(event.data.text)
      part.length += event.data.text.length
      return NONE
    }
    case 'text.ended':
    case 'reasoning.ended': {
      const key = partKey(session, event.data.partId)
      const part = state.open.get(key)
      // a part a fork settles was started in the session it came from: it is found there
      if (!part) return NONE
      state.open.delete(key)
      const text = part.chunks.join('')
      if (text.trim() === '') return NONE
      return [
        {
          op: 'put',
          doc: {
            session,
            key: event.data.partId,
            kind: part.kind,
            seq: event.seq,
            event: event.type,
            at: event.at,
            by: part.by,
            ...(part.byId !== undefined && { byId: part.byId }),
            files: [],
            text: cut(text),
            marks: part.marks,
          },
        },
      ]
    }
    case 'tool.called': {
      const { tool, input, partId } = event.data
      const strings: string[] = []
      const files: string[] = []
      collectStrings(input, undefined, strings, files)
      return [put(event, partId, 'tool', [tool, ...strings].join('\n'), { files, tool })]
    }
    case 'tool.completed': {
      const { title, output, partId } = event.data
      return [extend(event, partId, title !== undefined && title !== '' ? `${title}\n${output}` : output)]
    }
    case 'tool.failed':
      return [extend(event, event.data.partId, `${event.data.error.kind}: ${event.data.error.message}`)]
    case 'permission.requested': {
      const { permission, patterns, requestId } = event.data
      return [put(event, requestId, 'permission', [permission, ...patterns].join('\n'), {})]
    }
    case 'permission.replied': {
      const { reply, message, requestId } = event.data
      return [extend(event, requestId, message === undefined ? reply : `${reply}\n${message}`, who(event))]
    }
    case 'workspace.snapshotted': {
      const { changed } = event.data
      if (changed.length === 0) return NONE
      const files = changed.map((c) => c.path)
      const text = changed.map((c) => `${c.status} ${c.path}`).join('\n')
      return [put(event, `files@${event.seq}`, 'file', text, { files })]
    }
    default:
      return NONE
  }
}

function partKey(session: string, partId: string): string {
  return `${session}\u0000${partId}`
}

function who(event: StoredEvent): { by: string; byId: string | undefined } {
  return { by: event.meta.by?.name ?? event.meta.actor, byId: event.meta.by?.id }
}

function cut(text: string): string {
  return text.length > MAX_DOC_CHARS ? text.slice(0, MAX_DOC_CHARS) : text
}

function put(
  event: StoredEvent,
  key: string,
  kind: DocKind,
  text: string,
  extra: { files?: readonly string[]; tool?: string },
): IndexOp {
  const { by, byId } = who(event)
  return {
    op: 'put',
    doc: {
      session: event.sessionId,
      key,
      kind,
      seq: event.seq,
      event: event.type,
      at: event.at,
      by,
      ...(byId !== undefined && { byId }),
      ...(extra.tool !== undefined && { tool: extra.tool }),
      files: extra.files ?? [],
      text: cut(text),
      marks: [event.seq, 0],
    },
  }
}

function titleDoc(event: StoredEvent, title: string): IndexOp {
  return put(event, 'title', 'title', title, {})
}

function extend(event: StoredEvent, key: string, text: string, by?: { by: string; byId: string | undefined }): IndexOp {
  return {
    op: 'extend',
    session: event.sessionId,
    key,
    text,
    seq: event.seq,
    event: event.type,
    at: event.at,
    ...(by && { by: by.by }),
    ...(by?.byId !== undefined && { byId: by.byId }),
  }
}

/** A tool input's argument names that hold a path (the built-ins', docs/TOOLS.md). */
const PATH_ARGUMENTS = new Set(['filePath', 'path', 'file', 'paths', 'workdir'])

/** Every string in a tool's input, in order; the values of path arguments also as files. */
function collectStrings(value: unknown, name: string | undefined, out: string[], files: string[]): void {
  if (typeof value === 'string') {
    if (value === '') return
    out.push(value)
    if (name !== undefined && PATH_ARGUMENTS.has(name)) files.push(value)
  } else if (typeof value === 'number' || typeof value === 'boolean') out.push(String(value))
  else if (Array.isArray(value)) for (const item of value) collectStrings(item, name, out, files)
  else if (value !== null && typeof value === 'object')
    for (const [key, item] of Object.entries(value)) collectStrings(item, key, out, files)
}

/**
 * The run's changes with each document's later text folded into the `put` that made it, as `extend` would
 * have written it: a tool's output joins its call's document before either is written, so the full-text
 * index tokenizes it once instead of deleting and adding it again. The documents come out the same, in the
 * same order (so with the same ids) as when applied one by one.
 */
export function coalesced(ops: readonly IndexOp[]): readonly IndexOp[] {
  const open = new Map<string, { doc: SearchDoc; at: number }>()
  const out: (IndexOp | undefined)[] = []
  for (const op of ops) {
    if (op.op === 'put') {
      open.set(`${op.doc.session}\u0000${op.doc.key}`, { doc: op.doc, at: out.length })
      out.push(op)
    } else if (op.op === 'extend') {
      const pending = open.get(`${op.session}\u0000${op.key}`)
      if (!pending) {
        out.push(op)
        continue
      }
      const { doc } = pending
      const joined = `${doc.text}\n${op.text}`
      const text = joined.length > MAX_DOC_CHARS ? joined.slice(0, MAX_DOC_CHARS) : joined
      const marks = doc.text.length + 1 < MAX_DOC_CHARS ? [...doc.marks, op.seq, doc.text.length + 1] : doc.marks
      const merged: SearchDoc = {
        session: doc.session,
        key: doc.key,
        kind: doc.kind,
        seq: op.seq,
        event: op.event,
        at: op.at,
        by: op.by ?? doc.by,
        ...((op.byId ?? doc.byId) !== undefined && { byId: op.byId ?? doc.byId }),
        ...(doc.tool !== undefined && { tool: doc.tool }),
        files: doc.files,
        text,
        marks,
      }
      pending.doc = merged
      out[pending.at] = { op: 'put', doc: merged }
    } else out.push(op)
  }
  return out.filter((op) => op !== undefined)
}
