import type {
  Attachment,
  ChangedFile,
  DataOf,
  GitHead,
  InputPart,
  NetworkUse,
  PermissionRule,
  RunOutcome,
  ToolErrorKind,
  Usage,
} from '../../events/catalogue.js'

/** The read models (docs/EVENTS.md). Every field is derived from the log by evolve. */

export type SessionStatus = 'idle' | 'busy' | 'retrying' | 'waiting'

export interface PendingInput {
  readonly inputId: string
  readonly seq: number
  readonly parts: readonly InputPart[]
  readonly agent?: string
  readonly model?: string
  readonly delivery: 'steer' | 'queue'
  /** who submitted it (the principal of its token: docs/EVENTS.md "The envelope") */
  readonly by?: { readonly id: string; readonly name: string }
}

export interface PendingPermission {
  readonly requestId: string
  readonly seq: number
  readonly partId?: string
  readonly callId?: string
  readonly permission: string
  readonly patterns: readonly string[]
  readonly metadata?: Record<string, unknown>
  /** a sub-agent's request: the child session (and its call) that asked */
  readonly from?: { readonly sessionId: string; readonly partId?: string; readonly callId?: string }
}

/** An MCP server's question to the user, parked until answered (elicitation.requested). */
export interface PendingElicitation {
  readonly elicitationId: string
  readonly seq: number
  readonly server: string
  readonly message: string
  readonly requestedSchema: Record<string, unknown>
  readonly partId?: string
  readonly callId?: string
  /** a sub-agent's question: the child session (and its call) whose MCP call was asked */
  readonly from?: { readonly sessionId: string; readonly partId?: string; readonly callId?: string }
}

export interface SessionRule extends PermissionRule {
  readonly ruleId: string
}

export interface Totals {
  readonly inputTokens: number
  readonly outputTokens: number
  readonly reasoningTokens: number
  readonly cachedInputTokens: number
  readonly cost: number
}

export interface Session {
  readonly id: string
  readonly title: string
  readonly directory: string
  readonly agent: string
  readonly model: string | null
  /** a sub-agent's child session: the parent session, its task call and the agent that called */
  readonly parent: { readonly sessionId: string; readonly callId: string; readonly agent?: string } | null
  readonly forkedFrom: { readonly sessionId: string; readonly seq: number } | null
  readonly status: SessionStatus
  readonly run: {
    readonly runId: string
    readonly attempt: number
    readonly cancelRequested: boolean
  } | null
  readonly lastRun: {
    readonly runId: string
    readonly outcome: RunOutcome
    readonly error?: { kind: string; message: string }
  } | null
  readonly retry: { readonly attempt: number; readonly delayMs: number; readonly error: string } | null
  readonly totals: Totals
  /** rules configured for the session (session.rules.changed) */
  readonly rules: readonly PermissionRule[]
  /** rules added by "always" replies, each revocable by id */
  readonly approvals: readonly SessionRule[]
  /** accepted inputs not yet delivered to a run */
  readonly inbox: readonly PendingInput[]
  readonly pendingPermissions: readonly PendingPermission[]
  /** MCP elicitations waiting for an answer; optional, so rows written before the field existed read the same */
  readonly pendingElicitations?: readonly PendingElicitation[]
  readonly todos: readonly { content: string; status: string; priority: string }[]
  /** the latest compaction in flight or done */
  readonly compaction: {
    readonly compactionId: string
    readonly reason: string
    readonly status: 'requested' | 'running' | 'completed' | 'failed'
    readonly summaryMessageId?: string
    readonly tailStartMessageId?: string
    /** the latest completed compaction — where the model context starts — kept while a later one runs or fails */
    readonly applied?: { readonly summaryMessageId: string; readonly tailStartMessageId?: string }
  } | null
  /**
   * The latest pruning of tool outputs (context.pruned): the newest message then. A provider's usage
   * of that message or an older one counted the pruned outputs. Optional, like `imported`.
   */
  readonly pruned?: { readonly throughMessageId: string }
  readonly archived: boolean
  /**
   * set by session.stranded: the session's node died and no live node may take its directory over; its open
   * work waits for a node on `host`. Cleared when a run starts, resumes or finishes. Optional, like `imported`.
   */
  readonly stranded?: { readonly node: string; readonly host: string; readonly at: string }
  /**
   * set by session.imported: the history came from an import file. The session is read-only
   * (SESSION_READ_ONLY) and never run; a fork of it needs a directory and inherits no rules,
   * approvals or inbox. Optional, so rows written before the field existed read the same.
   */
  readonly imported?: {
    readonly originalId: string
    readonly importId: string
    readonly events: number
    readonly digest: string
  }
  /**
   * The latest recorded snapshot of the session directory (workspace.snapshotted):
   * its tree and the seq that recorded it. Optional, like `imported`.
   */
  readonly workspace?: {
    readonly tree: string
    readonly seq: number
    readonly large?: readonly { path: string; size: number }[]
    /** what HEAD named in the directory's repository when it was recorded (none: not a repository's top level) */
    readonly git?: GitHead
  }
  /** a revert or unrevert in progress (workspace.restore.started, until completed or failed) */
  readonly restoring?: DataOf<'workspace.restore.started'>
  /**
   * The latest completed revert, until an unrevert undoes it or an input makes
   * it final: `from` is the tree unrevert restores, `messages` those hidden.
   */
  readonly revert?: {
    readonly restoreId: string
    readonly to: number
    readonly from: string
    readonly tree: string
    readonly messages: readonly string[]
  }
  /** a fork's directory being written (workspace.materialize.started, until it ends) */
  readonly materializing?: { readonly tree: string; readonly directory: string; readonly git?: GitHead }
  readonly createdAt: string
  readonly updatedAt: string
  /** seq of the session's latest own event */
  readonly lastSeq: number
  /** the session's version (count of its own events) */
  readonly version: number
}

export interface Message {
  readonly id: string
  readonly sessionId: string
  readonly role: 'user' | 'assistant'
  readonly parentId?: string
  readonly agent: string
  readonly model: string | null
  readonly inputId?: string
  /** a user message: who submitted it */
  readonly by?: { readonly id: string; readonly name: string }
  readonly summary?: boolean
  readonly steered?: boolean
  readonly createdAt: string
  readonly completedAt?: string
  readonly finish?: string
  readonly usage?: Usage
  readonly cost?: number
  readonly error?: { readonly kind: string; readonly message: string }
  /** hidden from the model by this revert (kept in the log; shown again by an unrevert until it is final) */
  readonly reverted?: string
}

interface PartBase {
  readonly id: string
  readonly sessionId: string
  readonly messageId: string
}

export interface TextPart extends PartBase {
  readonly type: 'text' | 'reasoning'
  readonly text: string
  readonly ended: boolean
  /** reasoning: the provider's metadata for it (replayed to the provider: src/runtime/loop/chat-messages.ts) */
  readonly providerMetadata?: Record<string, Record<string, unknown>>
}

export interface FilePart extends PartBase {
  readonly type: 'file'
  readonly path?: string
  readonly url?: string
  readonly mediaType?: string
  readonly filename?: string
  /** the content read at submit, as a blob (src/runtime/inbox/attach.ts) */
  readonly blob?: string
  readonly size?: number
  readonly encoding?: 'utf8' | 'base64'
}

export type ToolState = 'pending' | 'running' | 'completed' | 'error'

export interface ToolPart extends PartBase {
  readonly type: 'tool'
  readonly callId: string
  readonly tool: string
  readonly state: ToolState
  readonly rawInput: string
  readonly input?: unknown
  readonly output?: string
  readonly title?: string
  readonly metadata?: Record<string, unknown>
  readonly attachments?: readonly Attachment[]
  /** what the call's connections through the sandbox's proxy got, one entry per host, port and outcome (tool.network) */
  readonly network?: readonly NetworkUse[]
  readonly error?: { readonly kind: ToolErrorKind; readonly message: string }
  /** the user's answer to the call's permission request, and who gave it */
  readonly permission?: {
    readonly reply: 'once' | 'always' | 'reject'
    readonly by?: { readonly id: string; readonly name: string }
  }
  readonly startedAt?: string
  readonly endedAt?: string
  /** its output is no longer sent to the model, a marker instead (context.pruned); the part keeps it */
  readonly pruned?: boolean
}

export interface StepStartPart extends PartBase {
  readonly type: 'step-start'
  readonly step: number
  readonly contextDigest: string
  /** the model's configured sampling settings applied to the call */
  readonly settings?: { readonly maxOutputTokens?: number; readonly temperature?: number; readonly topP?: number }
}

export interface StepFinishPart extends PartBase {
  readonly type: 'step-finish'
  readonly finishReason: string
  readonly usage: Usage
  /** USD, from the model's configured prices */
  readonly cost?: number
}

export interface SubtaskPart extends PartBase {
  readonly type: 'subtask'
  readonly callId: string
  readonly childSessionId: string
  readonly outcome?: RunOutcome
}

/** What an assistant message's tool calls changed in the workspace: one entry per file, line counts summed. */
export interface PatchPart extends PartBase {
  readonly type: 'patch'
  readonly files: readonly ChangedFile[]
}

export type Part = TextPart | FilePart | ToolPart | StepStartPart | StepFinishPart | SubtaskPart | PatchPart

/** One session's whole read model: what a fold of its log produces. */
export interface SessionView {
  session: Session | null
  readonly messages: Map<string, Message>
  readonly parts: Map<string, Part>
}

export function emptyView(): SessionView {
  return { session: null, messages: new Map(), parts: new Map() }
}
