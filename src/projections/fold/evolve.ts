import { copyWith, mergeOwn } from '../../events/copy.js'
import { ChronicleError } from '../../events/errors.js'
import type { StoredEvent } from '../../events/envelope.js'
import type { ChangedFile, ChronicleEvent, Usage } from '../../events/catalogue.js'
import type { Message, Part, PendingInput, Session, SessionView, Totals, ToolPart } from './model.js'

/**
 * The one projection: given a session's view and its next event, the entities
 * that event changes. Pure — it reads the view and returns new objects, never
 * mutating. The same function drives the live projection, rebuild, verify and
 * time travel; `apply` folds its result into a view.
 */
export interface Changes {
  readonly session?: Session
  readonly messages?: readonly Message[]
  readonly parts?: readonly Part[]
}

export function evolve(view: SessionView, event: StoredEvent): Changes {
  const session = view.session
  if (event.type === 'session.created') return { session: created(event) }
  if (session === null) {
    throw new ChronicleError('CORRUPT_EVENT', `event ${event.seq} (${event.type}) precedes its session's creation`)
  }
  switch (event.type) {
    case 'session.forked':
      return { session: forked(session, event) }
    case 'session.renamed':
      return { session: touch(session, event, { title: event.data.title }) }
    case 'title.started':
    case 'title.failed':
      return { session: touch(session, event) }
    case 'session.archived':
      return { session: touch(session, event, { archived: true }) }
    case 'session.unarchived':
      return { session: touch(session, event, { archived: false }) }
    case 'session.rules.changed':
      return { session: touch(session, event, { rules: event.data.rules }) }
    case 'session.imported':
      return { session: touch(session, event, { imported: event.data }) }
    case 'session.stranded':
      return {
        session: touch(session, event, { stranded: { node: event.data.node, host: event.data.host, at: event.at } }),
      }

    case 'input.accepted': {
      const { inputId, parts, agent, model, delivery, noReply, message } = event.data
      const by = event.meta.by
      const input: PendingInput = {
        inputId,
        seq: event.seq,
        parts,
        delivery,
        ...(agent && { agent }),
        ...(model && { model }),
        ...(by && { by }),
      }
      // noReply: a user message at once (none when logged without its ids), else into the inbox
      if (noReply)
        return { session: touch(session, event), ...(message && userMessage(session, event, input, message)) }
      return { session: touch(session, event, { inbox: [...session.inbox, input] }) }
    }
    case 'input.delivered': {
      const { inputId, messageId, partIds, steered } = event.data
      const input = session.inbox.find((i) => i.inputId === inputId)
      if (!input) throw new ChronicleError('CORRUPT_EVENT', `event ${event.seq} delivers unknown input ${inputId}`)
      return {
        session: touch(session, event, { inbox: session.inbox.filter((i) => i.inputId !== inputId) }),
        ...userMessage(session, event, input, { messageId, partIds }, steered),
      }
    }

    case 'run.started':
      return {
        session: touch(
          session,
          event,
          Object.assign(
            {
              status: 'busy' as const,
              run: { runId: event.data.runId, attempt: 0, cancelRequested: false },
              retry: null,
            },
            unstranded(session),
          ),
        ),
      }
    case 'run.resumed':
      return {
        session: touch(
          session,
          event,
          Object.assign(
            {
              // a resumed run whose calls still wait on re-offered permission requests is waiting, not busy
              status: session.pendingPermissions.length > 0 ? ('waiting' as const) : ('busy' as const),
              run: {
                runId: event.data.runId,
                attempt: event.data.attempt,
                cancelRequested: session.run?.cancelRequested ?? false,
              },
            },
            unstranded(session),
          ),
        ),
      }
    case 'run.cancel.requested':
      return {
        session: touch(session, event, session.run ? { run: copyWith(session.run, { cancelRequested: true }) } : {}),
      }
    case 'run.finished': {
      const { runId, outcome, error } = event.data
      return {
        session: touch(
          session,
          event,
          Object.assign(
            { status: 'idle' as const, run: null, retry: null, lastRun: { runId, outcome, ...(error && { error }) } },
            unstranded(session),
          ),
        ),
      }
    }

    case 'message.created': {
      const { messageId, role, parentId, agent, model, summary } = event.data
      const message: Message = {
        id: messageId,
        sessionId: session.id,
        role,
        agent,
        model,
        createdAt: event.at,
        ...(parentId !== undefined && { parentId }),
        ...(summary && { summary }),
      }
      return { session: touch(session, event), messages: [message] }
    }
    case 'message.completed': {
      const { messageId, finish, usage, cost, error } = event.data
      const message = view.messages.get(messageId)
      if (!message)
        throw new ChronicleError('CORRUPT_EVENT', `event ${event.seq} completes unknown message ${messageId}`)
      return {
        session: touch(session, event, { totals: addTotals(session.totals, usage, cost) }),
        messages: [
          copyWith(message, {
            completedAt: event.at,
            ...(finish !== undefined && { finish }),
            ...(usage && { usage }),
            ...(cost !== undefined && { cost }),
            ...(error && { error }),
          }),
        ],
      }
    }

    case 'step.started': {
      const { messageId, partId, step, contextDigest, settings } = event.data
      return {
        session: touch(session, event, session.status === 'retrying' ? { status: 'busy', retry: null } : {}),
        parts: [
          newPart(session, messageId, partId, {
            type: 'step-start',
            step,
            contextDigest,
            ...(settings && { settings }),
          }),
        ],
      }
    }
    case 'step.finished': {
      const { messageId, partId, finishReason, usage, cost } = event.data
      return {
        session: touch(session, event),
        parts: [
          newPart(session, messageId, partId, {
            type: 'step-finish',
            finishReason,
            usage,
            ...(cost !== undefined && { cost }),
          }),
        ],
      }
    }
    case 'step.retried': {
      const { attempt, delayMs, error } = event.data
      return { session: touch(session, event, { status: 'retrying', retry: { attempt, delayMs, error } }) }
    }

    case 'text.started':
    case 'reasoning.started': {
      const type = event.type === 'text.started' ? 'text' : 'reasoning'
      return {
        session: touch(session, event),
        parts: [newPart(session, event.data.messageId, event.data.partId, { type, text: '', ended: false })],
      }
    }
    case 'text.delta':
    case 'reasoning.delta':
    case 'tool.input.delta':
      return { session: touch(session, event), parts: [grown(view, event) as Part] }
    case 'text.ended':
    case 'reasoning.ended': {
      const p = partOf<Extract<Part, { type: 'text' | 'reasoning' }>>(view, event, event.data.partId, TEXT_TYPES)
      const metadata = event.type === 'reasoning.ended' ? event.data.providerMetadata : undefined
      return {
        session: touch(session, event),
        parts: [copyWith(p, { ended: true, ...(metadata && { providerMetadata: metadata }) })],
      }
    }

    case 'tool.input.started': {
      const { messageId, partId, callId, tool } = event.data
      const p = newPart(session, messageId, partId, {
        type: 'tool',
        callId,
        tool,
        state: 'pending',
        rawInput: '',
      })
      return { session: touch(session, event), parts: [p] }
    }
    case 'tool.called': {
      const { messageId, partId, callId, tool, input } = event.data
      const prior = view.parts.get(partId)
      const p = newPart(session, messageId, partId, {
        type: 'tool',
        callId,
        tool,
        rawInput: prior?.type === 'tool' ? prior.rawInput : JSON.stringify(input ?? null),
        state: 'running',
        input,
        startedAt: event.at,
      })
      return { session: touch(session, event), parts: [p] }
    }
    case 'tool.progressed': {
      const p = partOf<ToolPart>(view, event, event.data.partId, 'tool')
      return {
        session: touch(session, event),
        parts: [copyWith(p, { metadata: mergeOwn(p.metadata, event.data.metadata) })],
      }
    }
    case 'tool.network': {
      const { partId, host, port, allowed, connections, bytesIn, bytesOut, reason } = event.data
      const p = partOf<ToolPart>(view, event, partId, 'tool')
      const use = { host, port, allowed, connections, bytesIn, bytesOut, ...(reason !== undefined && { reason }) }
      return { session: touch(session, event), parts: [copyWith(p, { network: [...(p.network ?? []), use] })] }
    }
    case 'tool.completed': {
      const { partId, output, title, metadata, attachments } = event.data
      const p = partOf<ToolPart>(view, event, partId, 'tool')
      const done: ToolPart = copyWith(p, {
        state: 'completed',
        output,
        endedAt: event.at,
        ...(title !== undefined && { title }),
        ...(metadata && { metadata: mergeOwn(p.metadata, metadata) }),
        ...(attachments && { attachments }),
      })
      return { session: touch(session, event), parts: [done] }
    }
    case 'tool.failed': {
      const p = partOf<ToolPart>(view, event, event.data.partId, 'tool')
      return {
        session: touch(session, event),
        parts: [copyWith(p, { state: 'error', error: event.data.error, endedAt: event.at })],
      }
    }

    case 'permission.requested': {
      const { requestId, partId, callId, permission, patterns, metadata, from } = event.data
      const pending = {
        requestId,
        seq: event.seq,
        permission,
        patterns,
        ...(partId !== undefined && { partId }),
        ...(callId !== undefined && { callId }),
        ...(metadata && { metadata }),
        ...(from && { from }),
      }
      return {
        session: touch(session, event, {
          status: 'waiting',
          pendingPermissions: [...session.pendingPermissions, pending],
        }),
      }
    }
    case 'permission.replied': {
      const request = session.pendingPermissions.find((p) => p.requestId === event.data.requestId)
      const pendingPermissions = session.pendingPermissions.filter((p) => p.requestId !== event.data.requestId)
      const waiting = pendingPermissions.length > 0 || (session.pendingElicitations?.length ?? 0) > 0
      const status = waiting ? 'waiting' : session.run ? 'busy' : 'idle'
      // the call a person answered (the reply command names its request) records the answer and who gave it;
      // a sub-agent's call lives in its own session; a settlement or a cascade closes requests unanswered
      const answeredHere = event.meta.request === event.data.requestId && request?.partId && !request.from
      const part = answeredHere ? view.parts.get(request.partId as string) : undefined
      const by = event.meta.by
      const answered =
        part?.type === 'tool' ? [copyWith(part, { permission: { reply: event.data.reply, ...(by && { by }) } })] : []
      return {
        session: touch(session, event, { pendingPermissions, status }),
        ...(answered.length > 0 && { parts: answered }),
      }
    }
    case 'permission.rule.added':
      return {
        session: touch(session, event, {
          approvals: [...session.approvals, { ruleId: event.data.ruleId, ...event.data.rule }],
        }),
      }
    case 'permission.rule.removed':
      return {
        session: touch(session, event, { approvals: session.approvals.filter((r) => r.ruleId !== event.data.ruleId) }),
      }

    case 'elicitation.requested': {
      const { elicitationId, server, message, requestedSchema, partId, callId, from } = event.data
      const pending = {
        elicitationId,
        seq: event.seq,
        server,
        message,
        requestedSchema,
        ...(partId !== undefined && { partId }),
        ...(callId !== undefined && { callId }),
        ...(from && { from }),
      }
      return {
        session: touch(session, event, {
          status: 'waiting',
          pendingElicitations: [...(session.pendingElicitations ?? []), pending],
        }),
      }
    }
    case 'elicitation.answered': {
      const pendingElicitations = (session.pendingElicitations ?? []).filter(
        (e) => e.elicitationId !== event.data.elicitationId,
      )
      const waiting = session.pendingPermissions.length > 0 || pendingElicitations.length > 0
      return {
        session: touch(session, event, {
          pendingElicitations,
          status: waiting ? 'waiting' : session.run ? 'busy' : 'idle',
        }),
      }
    }

    case 'compaction.requested':
      return {
        session: touch(session, event, {
          compaction: {
            compactionId: event.data.compactionId,
            reason: event.data.reason,
            status: 'requested',
            ...(session.compaction?.applied && { applied: session.compaction.applied }),
          },
        }),
      }
    case 'compaction.started':
      return {
        session: touch(session, event, {
          compaction: compaction(session, event.data.compactionId, { status: 'running' }),
        }),
      }
    case 'compaction.completed': {
      const { compactionId, summaryMessageId, tailStartMessageId } = event.data
      const applied = { summaryMessageId, ...(tailStartMessageId && { tailStartMessageId }) }
      const patch = { status: 'completed' as const, ...applied, applied }
      return { session: touch(session, event, { compaction: compaction(session, compactionId, patch) }) }
    }
    case 'compaction.failed':
      return {
        session: touch(session, event, {
          compaction: compaction(session, event.data.compactionId, { status: 'failed' }),
        }),
      }

    case 'context.pruned': {
      const parts = event.data.partIds.map((partId) =>
        copyWith(partOf<ToolPart>(view, event, partId, 'tool'), { pruned: true }),
      )
      let newest = ''
      for (const id of view.messages.keys()) if (id > newest) newest = id
      return { session: touch(session, event, { pruned: { throughMessageId: newest } }), parts }
    }

    case 'subtask.started': {
      const { partId, callId, childSessionId } = event.data
      const owner = view.parts.get(partId)
      const messageId = owner?.messageId ?? ''
      const subtaskPartId = `${partId}:subtask`
      return {
        session: touch(session, event),
        parts: [newPart(session, messageId, subtaskPartId, { type: 'subtask', callId, childSessionId })],
      }
    }
    case 'subtask.finished': {
      const p = partOf<Extract<Part, { type: 'subtask' }>>(view, event, `${event.data.partId}:subtask`, 'subtask')
      return { session: touch(session, event), parts: [copyWith(p, { outcome: event.data.outcome })] }
    }

    case 'todo.updated':
      return { session: touch(session, event, { todos: event.data.items }) }

    case 'workspace.snapshotted': {
      const { tree, reason, messageId, changed, large, git } = event.data
      const workspace = { tree, seq: event.seq, ...(large && large.length > 0 && { large }), ...(git && { git }) }
      const next = touch(session, event, { workspace })
      if (reason !== 'tool' || !messageId || changed.length === 0) return { session: next }
      const id = `${messageId}:patch`
      const prior = view.parts.get(id)
      const files = mergeChanges(prior?.type === 'patch' ? prior.files : [], changed)
      return { session: next, parts: [newPart(session, messageId, id, { type: 'patch', files })] }
    }

    case 'workspace.restore.started':
      return { session: touch(session, event, { restoring: event.data }) }
    case 'workspace.restore.completed': {
      const restore = session.restoring
      if (!restore || restore.restoreId !== event.data.restoreId)
        throw new ChronicleError('CORRUPT_EVENT', `event ${event.seq} completes a restore that was not started`)
      const { restoring: _, revert: prior, ...rest } = session
      // a restore writes files; HEAD stays where it was
      const git = session.workspace?.git
      const workspace = { tree: restore.tree, seq: event.seq, ...(git && { git }) }
      // a handover only puts back what the session recorded: its revert, if any, stands
      if (restore.kind === 'handover') {
        const { restoring: _done, ...kept } = session
        return { session: touch(kept as Session, event, { workspace }) }
      }
      if (restore.kind === 'unrevert') {
        const messages = revealed(view, prior?.messages ?? [])
        return { session: touch(rest as Session, event, { workspace }), messages }
      }
      const hidden = new Set(restore.messages)
      // a revert over a revert: messages the earlier one hid and this one keeps are shown again
      const messages = [
        ...revealed(
          view,
          (prior?.messages ?? []).filter((id) => !hidden.has(id)),
        ),
        ...restore.messages.flatMap((id) => {
          const message = view.messages.get(id)
          return message ? [copyWith(message, { reverted: restore.restoreId })] : []
        }),
      ]
      const revert = {
        restoreId: restore.restoreId,
        to: restore.to ?? 0,
        // what unrevert brings back is the directory before the first of consecutive reverts
        from: prior?.from ?? restore.from,
        tree: restore.tree,
        messages: restore.messages,
      }
      return { session: touch(rest as Session, event, { workspace, revert }), messages }
    }
    case 'workspace.restore.failed': {
      const { restoring: _, ...rest } = session
      return { session: touch(rest as Session, event) }
    }
    case 'session.revert.finalized': {
      const { revert: _, ...rest } = session
      return { session: touch(rest as Session, event) }
    }
    case 'workspace.materialize.started':
      return { session: touch(session, event, { materializing: event.data }) }
    case 'workspace.materialized': {
      const { materializing: _, ...rest } = session
      const { tree, git } = event.data
      return { session: touch(rest as Session, event, { workspace: { tree, seq: event.seq, ...(git && { git }) } }) }
    }
    case 'workspace.materialize.failed': {
      const { materializing: _, ...rest } = session
      return { session: touch(rest as Session, event) }
    }

    case 'token.created':
    case 'token.revoked':
    case 'share.created':
    case 'share.revoked':
    case 'mcp.server.connecting':
    case 'mcp.server.ready':
    case 'mcp.server.failed':
    case 'mcp.server.auth_required':
    case 'mcp.server.disconnected':
      // the system streams' (src/http/principals.ts, src/projections/queries/mcp-servers.ts fold them); never a session's
      throw new ChronicleError('CORRUPT_EVENT', `event ${event.seq} (${event.type}) is not a session's event`)

    default: {
      const unknown: never = event
      throw new ChronicleError('CORRUPT_EVENT', `unknown event type at seq ${(unknown as StoredEvent).seq}`)
    }
  }
}

// Module-level helpers rather than closures inside evolve: under tsx (esbuild keepNames)
// every closure created per call costs a defineProperty, which made evolve ~20x slower.

/** The user message an input becomes, with its parts. */
function userMessage(
  session: Session,
  event: StoredEvent,
  input: PendingInput,
  ids: { readonly messageId: string; readonly partIds: readonly string[] },
  steered?: boolean,
): { messages: Message[]; parts: Part[] } {
  const { messageId, partIds } = ids
  const message: Message = {
    id: messageId,
    sessionId: session.id,
    role: 'user',
    agent: input.agent ?? session.agent,
    model: input.model ?? session.model,
    inputId: input.inputId,
    ...(input.by && { by: input.by }),
    createdAt: event.at,
    ...(steered && { steered }),
  }
  const parts: Part[] = input.parts.map((p, i) => {
    const partId = partIds[i]
    if (partId === undefined)
      throw new ChronicleError('CORRUPT_EVENT', `event ${event.seq} lacks a part id for part ${i}`)
    return p.type === 'text'
      ? newPart(session, messageId, partId, { type: 'text', text: p.text, ended: true })
      : newPart(session, messageId, partId, p)
  })
  return { messages: [message], parts }
}

/** Messages a revert hid, shown again. */
function revealed(view: SessionView, ids: readonly string[]): Message[] {
  return ids.flatMap((id) => {
    const message = view.messages.get(id)
    if (!message) return []
    const { reverted: _, ...shown } = message
    return [shown]
  })
}

/** The session after an event that changed `patch` (and always its version, seq and time). */
/** A run that starts, resumes or finishes runs somewhere: the session is no longer stranded (session.stranded). */
function unstranded(session: Session): Partial<Session> {
  return session.stranded ? { stranded: undefined } : {}
}

function touch(session: Session, event: StoredEvent, patch: Partial<Session> = {}): Session {
  return copyWith(session, Object.assign({ updatedAt: event.at, lastSeq: event.seq, version: event.version }, patch))
}

/**
 * A streamed delta's part: the one it names with its string grown by the
 * delta (undefined: the event is not a delta). Besides this a delta only
 * moves its session's head, which the live projection reads from the log
 * rather than storing (session-rows.ts, part-rows.ts).
 */
export function grown(view: SessionView, event: StoredEvent): Part | undefined {
  switch (event.type) {
    case 'text.delta':
    case 'reasoning.delta': {
      const p = partOf<Extract<Part, { type: 'text' | 'reasoning' }>>(view, event, event.data.partId, TEXT_TYPES)
      return copyWith(p, { text: p.text + event.data.text })
    }
    case 'tool.input.delta': {
      const p = partOf<ToolPart>(view, event, event.data.partId, 'tool')
      return copyWith(p, { rawInput: p.rawInput + event.data.delta })
    }
  }
  return undefined
}

/** The parts a text or reasoning delta grows (made once: grown runs for every delta). */
const TEXT_TYPES: ('text' | 'reasoning')[] = ['text', 'reasoning']

/** The part an event names, which must exist with one of the given types. */
function partOf<P extends Part>(
  view: SessionView,
  event: StoredEvent,
  partId: string,
  type: P['type'] | P['type'][],
): P {
  const found = view.parts.get(partId)
  const types = Array.isArray(type) ? type : [type]
  if (!found || !types.includes(found.type)) {
    throw new ChronicleError(
      'CORRUPT_EVENT',
      `event ${event.seq} (${event.type}) names unknown ${types.join('/')} part ${partId}`,
    )
  }
  return found as P
}

/** A part's fields besides its ids, for each kind of part. */
type PartFields = Part extends infer P ? (P extends Part ? Omit<P, 'id' | 'sessionId' | 'messageId'> : never) : never

/** A new part of `messageId`: its ids, then its fields (Object.assign: src/events/copy.ts). */
function newPart(session: Session, messageId: string, partId: string, fields: PartFields): Part {
  return Object.assign({ id: partId, sessionId: session.id, messageId }, fields)
}

/** Folds a Changes into a view in place (the fold driver's half of evolve). */
export function apply(view: SessionView, changes: Changes): void {
  if (changes.session) view.session = changes.session
  for (const m of changes.messages ?? []) view.messages.set(m.id, m)
  for (const p of changes.parts ?? []) view.parts.set(p.id, p)
}

function created(event: StoredEvent<Extract<ChronicleEvent, { type: 'session.created' }>>): Session {
  const { directory, agent, model, title, parent, rules } = event.data
  return {
    id: event.sessionId,
    title: title ?? 'New session',
    directory,
    agent,
    model,
    parent: parent ?? null,
    forkedFrom: null,
    status: 'idle',
    run: null,
    lastRun: null,
    retry: null,
    totals: { inputTokens: 0, outputTokens: 0, reasoningTokens: 0, cachedInputTokens: 0, cost: 0 },
    rules: rules ?? [],
    approvals: [],
    inbox: [],
    pendingPermissions: [],
    todos: [],
    compaction: null,
    archived: false,
    createdAt: event.at,
    updatedAt: event.at,
    lastSeq: event.seq,
    version: event.version,
  }
}

/**
 * A fork's session: the parent's state at the fork point under the child's id. It is never
 * imported itself; a fork of imported history (`fromImport`) keeps none of its authority.
 */
function forked(parent: Session, event: StoredEvent<Extract<ChronicleEvent, { type: 'session.forked' }>>): Session {
  const { imported: _imported, stranded: _stranded, ...inherited } = parent
  const { from, title, directory, fromImport } = event.data
  return copyWith(inherited, {
    id: event.sessionId,
    title: title ?? `${parent.title} (fork)`,
    forkedFrom: from,
    parent: null,
    archived: false,
    ...(directory !== undefined && { directory }),
    ...(fromImport && { rules: [], approvals: [], inbox: [] }),
    createdAt: event.at,
    updatedAt: event.at,
    lastSeq: event.seq,
    version: event.version,
  })
}

/** A message's patch after another tool's changes: per file, the latest status and the summed line counts. */
function mergeChanges(prior: readonly ChangedFile[], changed: readonly ChangedFile[]): ChangedFile[] {
  const byPath = new Map(prior.map((f) => [f.path, f]))
  for (const f of changed) {
    const before = byPath.get(f.path)
    if (!before) {
      byPath.set(f.path, f)
      continue
    }
    // added then modified is still added; anything then deleted is deleted; deleted then added is modified
    const status =
      f.status === 'deleted'
        ? 'deleted'
        : before.status === 'added'
          ? 'added'
          : before.status === 'deleted'
            ? 'modified'
            : f.status
    const binary = before.binary || f.binary
    const counts = binary
      ? {}
      : { added: (before.added ?? 0) + (f.added ?? 0), removed: (before.removed ?? 0) + (f.removed ?? 0) }
    byPath.set(f.path, { path: f.path, status, ...counts, ...(binary && { binary: true as const }) })
  }
  return [...byPath.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
}

function compaction(session: Session, compactionId: string, patch: Partial<NonNullable<Session['compaction']>>) {
  const current = session.compaction
  const base =
    current && current.compactionId === compactionId
      ? current
      : {
          compactionId,
          reason: 'auto',
          status: 'requested' as const,
          ...(current?.applied && { applied: current.applied }),
        }
  return Object.assign({}, base, patch)
}

function addTotals(t: Totals, usage: Usage | undefined, cost: number | undefined): Totals {
  return {
    inputTokens: t.inputTokens + (usage?.inputTokens ?? 0),
    outputTokens: t.outputTokens + (usage?.outputTokens ?? 0),
    reasoningTokens: t.reasoningTokens + (usage?.reasoningTokens ?? 0),
    cachedInputTokens: t.cachedInputTokens + (usage?.cachedInputTokens ?? 0),
    cost: t.cost + (cost ?? 0),
  }
}
