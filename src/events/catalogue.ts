import { z } from 'zod'

/**
 * The event catalogue: every fact Chronicle records, as one zod schema each,
 * gathered in one discriminated union. Each entry says who appends it, what it
 * means, and which read-model fields it changes (see src/projections/fold/evolve.ts).
 * docs/EVENTS.md is the long-form version of this file.
 *
 * Events are dotted past-tense facts. The envelope (seq, session, version,
 * time, meta) is added by the store, never by the code that decides.
 */

const id = z.string().min(1).max(200)

export const Usage = z.object({
  inputTokens: z.number().int().nonnegative().optional(),
  outputTokens: z.number().int().nonnegative().optional(),
  reasoningTokens: z.number().int().nonnegative().optional(),
  cachedInputTokens: z.number().int().nonnegative().optional(),
  /** true when the provider sent no usage and the runtime estimated it */
  estimated: z.boolean().optional(),
})
export type Usage = z.infer<typeof Usage>

export const PermissionAction = z.enum(['allow', 'deny', 'ask'])
export const PermissionRule = z.object({
  permission: z.string().min(1),
  pattern: z.string().min(1),
  action: PermissionAction,
})
export type PermissionRule = z.infer<typeof PermissionRule>

export const InputPart = z.discriminatedUnion('type', [
  z.object({ type: z.literal('text'), text: z.string() }),
  z.object({
    type: z.literal('file'),
    path: z.string().optional(),
    url: z.string().optional(),
    mediaType: z.string().optional(),
    filename: z.string().optional(),
    /**
     * Set by the server when it reads a file given by `path` at submit (never by a client): the content as a
     * blob (sha256), its size in bytes, and how the blob holds it — UTF-8 text or base64 (docs/AUDIT.md).
     */
    blob: z.string().optional(),
    size: z.number().int().nonnegative().optional(),
    encoding: z.enum(['utf8', 'base64']).optional(),
  }),
])
export type InputPart = z.infer<typeof InputPart>

export const ToolErrorKind = z.enum(['failed', 'invalid', 'denied', 'aborted', 'interrupted'])
export type ToolErrorKind = z.infer<typeof ToolErrorKind>
export const ToolError = z.object({ kind: ToolErrorKind, message: z.string() })

export const Attachment = z.object({
  type: z.enum(['image', 'audio', 'resource', 'file']),
  mediaType: z.string().optional(),
  /** base64 payload, or omitted when `uri` points to the content */
  data: z.string().optional(),
  uri: z.string().optional(),
  text: z.string().optional(),
})
export type Attachment = z.infer<typeof Attachment>

/**
 * How a run ended: `idle` (the stop rule held), `error` (the model failed), `cancelled` (the user's
 * cancel), `max_steps` (the step budget), `failed` (a bug, or recovery past its budget), `rejected`
 * (a person rejected a permission request without a message: the run stopped after that step's
 * calls settled, unless the config's `permission.continueOnReject` is set — docs/TOOLS.md).
 */
export const RunOutcome = z.enum(['idle', 'error', 'cancelled', 'max_steps', 'failed', 'rejected'])
export type RunOutcome = z.infer<typeof RunOutcome>

export const MessageError = z.object({ kind: z.string(), message: z.string() })

const event = <T extends string, S extends z.ZodRawShape>(type: T, data: S) =>
  z.object({ type: z.literal(type), data: z.object(data) })

// ── session ───────────────────────────────────────────────────────────────
/** commands: a new session. Creates the Session read model (idle). */
export const SessionCreated = event('session.created', {
  directory: z.string().min(1),
  agent: z.string().min(1),
  model: z.string().nullable(),
  title: z.string().optional(),
  /**
   * set for a sub-agent's child session: the parent session and tool call, and
   * the agent that made the call (whose rules bound the child's: docs/SECURITY.md)
   */
  parent: z.object({ sessionId: id, callId: z.string(), agent: z.string().optional() }).optional(),
  rules: z.array(PermissionRule).optional(),
})
/**
 * commands (fork): first event of a fork; the child's state starts as the parent's state at `from.seq`.
 * `directory`: where the child works instead of the parent's directory. `fromImport`: the fork point
 * is imported history (session.imported), so the child keeps none of its authority — empty rules,
 * approvals and inbox; the fork command then requires a directory.
 */
export const SessionForked = event('session.forked', {
  from: z.object({ sessionId: id, seq: z.number().int().positive() }),
  title: z.string().optional(),
  directory: z.string().min(1).optional(),
  fromImport: z.literal(true).optional(),
})
/** commands, or runtime (a generated title: `titleId` names its task, meta.actor is runtime). Changes Session.title. */
export const SessionRenamed = event('session.renamed', { title: z.string().min(1).max(500), titleId: id.optional() })
/** runtime. After a session's first exchange, a small tool-less model call proposes a title (src/runtime/titles.ts). */
export const TitleStarted = event('title.started', { titleId: id, model: z.string() })
/** runtime. The title call failed or proposed nothing usable; the session keeps its title, and no run is affected. */
export const TitleFailed = event('title.failed', { titleId: id, error: z.string() })
/** commands. Marks the session archived; the log stays. */
export const SessionArchived = event('session.archived', {})
/** commands. Brings an archived session back to the default listing and lets it take input again. */
export const SessionUnarchived = event('session.unarchived', {})
/** commands. Replaces the session's configured permission rules. */
export const SessionRulesChanged = event('session.rules.changed', { rules: z.array(PermissionRule) })
/**
 * import (src/projections/transfer/export.ts), the last event of every session an import creates, in the
 * import's transaction. The history before it came from a file, not from this store's user or
 * runtime: sets Session.imported, which makes the session read-only (SESSION_READ_ONLY) and
 * inert (never run, resumed or woken); only a fork into a directory of the user's choice goes on.
 */
export const SessionImported = event('session.imported', {
  /** the session's id in the exported file */
  originalId: id,
  /** one id per import: every session created by the same import carries it */
  importId: id,
  /** how many of the file's events this session holds (versions 1…events; this event is the next) */
  events: z.number().int().positive(),
  /** sha256 (base64url) of the imported file's content */
  digest: z.string(),
})

/**
 * runtime (cluster, any live node). The session's node died and its directory is only on `host` (not under a
 * shared directory, docs/CLUSTER.md "Workspaces that move"): no live node may take it over, so its open work
 * (a run, or inputs waiting) waits for a node on that machine. Sets Session.stranded until a run starts,
 * resumes or finishes there.
 */
export const SessionStranded = event('session.stranded', {
  /** the dead node that owns the session */
  node: z.string().min(1),
  /** the machine its directory is on */
  host: z.string().min(1),
})

// ── input (the durable inbox) ─────────────────────────────────────────────
/**
 * commands (submit). Durable (FULL) before anything runs; adds to
 * Session.inbox — unless noReply: then it is a user message at once (the
 * ids in `message`), and no run starts for it. A noReply input logged before
 * `message` existed stays only in the log.
 */
export const InputAccepted = event('input.accepted', {
  inputId: id,
  parts: z.array(InputPart).min(1),
  agent: z.string().optional(),
  model: z.string().optional(),
  delivery: z.enum(['steer', 'queue']),
  noReply: z.boolean(),
  /** content digest that makes a resubmission with the same inputId idempotent */
  digest: z.string(),
  message: z.object({ messageId: id, partIds: z.array(id) }).optional(),
})
/** runtime. The input became a user message: creates the Message and its Parts, leaves the inbox. */
export const InputDelivered = event('input.delivered', {
  inputId: id,
  messageId: id,
  partIds: z.array(id),
  /** true when the input reached a running loop mid-run (steering) */
  steered: z.boolean().optional(),
})

// ── run ───────────────────────────────────────────────────────────────────
/** runtime (coordinator). Session becomes busy with this run. The durable "run in progress" marker. */
export const RunStarted = event('run.started', { runId: id, reason: z.string() })
/** runtime (recovery). A run interrupted by a restart continues; counts attempts. */
export const RunResumed = event('run.resumed', { runId: id, attempt: z.number().int().positive() })
/** commands (cancel). The user asked to stop; the run will end cancelled and never be resumed. */
export const RunCancelRequested = event('run.cancel.requested', { runId: id })
/** runtime. Ends the run; Session becomes idle. */
export const RunFinished = event('run.finished', {
  runId: id,
  outcome: RunOutcome,
  error: MessageError.optional(),
})

// ── message ───────────────────────────────────────────────────────────────
/** runtime. An assistant message (user messages come from input.delivered). */
export const MessageCreated = event('message.created', {
  messageId: id,
  role: z.enum(['assistant', 'user']),
  parentId: z.string().optional(),
  agent: z.string(),
  model: z.string().nullable(),
  /** a compaction summary message */
  summary: z.boolean().optional(),
})
/** runtime. Closes a message with its finish, usage and cost; adds usage and cost to the session totals. */
export const MessageCompleted = event('message.completed', {
  messageId: id,
  finish: z.string().optional(),
  usage: Usage.optional(),
  cost: z.number().nonnegative().optional(),
  error: MessageError.optional(),
})

// ── step ──────────────────────────────────────────────────────────────────
/** runtime (model adapter). One model call begins; `contextDigest` hashes the exact request. Adds a step-start Part. */
export const StepStarted = event('step.started', {
  messageId: id,
  partId: id,
  step: z.number().int().positive(),
  contextDigest: z.string(),
  /**
   * What the request was compiled from, so it can be rebuilt byte for byte (docs/AUDIT.md): the system prompt
   * and tool schemas as blobs (by sha256); the messages as the session's history at `version`, or (a
   * compaction's request, which is not the history) as a blob; and whether this was the budget's last step
   * (tools off, the max-steps note).
   */
  context: z
    .object({
      system: z.string(),
      tools: z.string(),
      version: z.number().int().positive().optional(),
      messages: z.string().optional(),
      lastStep: z.literal(true).optional(),
      /** what the model was taken to accept besides text: images and PDFs it takes are sent, others noted (absent: both) */
      accepts: z.array(z.enum(['image', 'pdf'])).optional(),
    })
    .optional(),
  /** the model's configured sampling settings applied to this call (none: the provider's defaults) */
  settings: z
    .object({
      maxOutputTokens: z.number().int().positive().optional(),
      temperature: z.number().optional(),
      topP: z.number().optional(),
    })
    .optional(),
})
/** runtime (model adapter). The model call ended. Adds a step-finish Part with usage. */
export const StepFinished = event('step.finished', {
  messageId: id,
  partId: id,
  finishReason: z.string(),
  usage: Usage,
  /** USD, from the model's configured prices (none when it has none) */
  cost: z.number().nonnegative().optional(),
})
/** runtime (model adapter). A retryable failure; the session is `retrying` until the next step event. */
export const StepRetried = event('step.retried', {
  messageId: id,
  attempt: z.number().int().positive(),
  delayMs: z.number().int().nonnegative(),
  error: z.string(),
})

// ── text and reasoning (one event per provider delta) ─────────────────────
const started = { messageId: id, partId: id }
/** runtime. A streamed text Part begins. */
export const TextStarted = event('text.started', started)
/** runtime. Appends to the text Part. */
export const TextDelta = event('text.delta', { partId: id, text: z.string() })
/** runtime. The text Part is complete. */
export const TextEnded = event('text.ended', { partId: id })
/** runtime. A streamed reasoning Part begins. */
export const ReasoningStarted = event('reasoning.started', started)
/** runtime. Appends to the reasoning Part. */
export const ReasoningDelta = event('reasoning.delta', { partId: id, text: z.string() })
/**
 * runtime. The reasoning Part is complete. `providerMetadata`: what the provider attached to it (a signature, an
 * item id, encrypted content), kept so the reasoning can be replayed to a provider that needs it.
 */
export const ReasoningEnded = event('reasoning.ended', {
  partId: id,
  providerMetadata: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
})

// ── tool calls ────────────────────────────────────────────────────────────
// `callId` is the provider's id (sent back with the result); `partId` is ours.
/** runtime. The model began streaming a tool call: a tool Part, state pending. */
export const ToolInputStarted = event('tool.input.started', {
  messageId: id,
  partId: id,
  callId: z.string(),
  tool: z.string(),
})
/** runtime. Appends to the tool Part's raw input. */
export const ToolInputDelta = event('tool.input.delta', { partId: id, delta: z.string() })
/** runtime. The call is complete and about to execute: state running, with the parsed input. */
export const ToolCalled = event('tool.called', {
  messageId: id,
  partId: id,
  callId: z.string(),
  tool: z.string(),
  // optional: a call whose arguments were absent is stored without the key (JSON drops undefined)
  input: z.unknown().optional(),
})
/** tools (via ctx.progress). Live metadata of a running tool, e.g. shell output so far. */
export const ToolProgressed = event('tool.progressed', { partId: id, metadata: z.record(z.string(), z.unknown()) })
/**
 * tools (bash through the sandbox's proxy, via ctx.network). The connections a call opened to one host and port,
 * or was refused, coalesced: one per host, port and outcome per call, appended when the call's command ends
 * (docs/SECURITY.md "The network by host"). `reason` is the refusal's stable code. Adds to the Part's `network`.
 */
export const ToolNetwork = event('tool.network', {
  partId: id,
  host: z.string(),
  port: z.number().int().min(0).max(65535),
  allowed: z.boolean(),
  connections: z.number().int().nonnegative(),
  bytesIn: z.number().int().nonnegative(),
  bytesOut: z.number().int().nonnegative(),
  reason: z.string().optional(),
})
export type NetworkUse = Omit<z.infer<typeof ToolNetwork>['data'], 'partId'>
/** runtime. The tool returned: state completed. */
export const ToolCompleted = event('tool.completed', {
  partId: id,
  output: z.string(),
  title: z.string().optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  attachments: z.array(Attachment).optional(),
})
/** runtime, recovery or fork settlement. The call ended without a result: state error with its kind. */
export const ToolFailed = event('tool.failed', { partId: id, error: ToolError })

// ── permissions ───────────────────────────────────────────────────────────
/**
 * tools (via ctx.ask). A call is parked until a reply; Session becomes `waiting`.
 * A sub-agent's request is raised in the top session of its chain (the one a
 * user watches), with `from` naming the child session and call that asked.
 */
export const PermissionRequested = event('permission.requested', {
  requestId: id,
  partId: z.string().optional(),
  callId: z.string().optional(),
  permission: z.string(),
  patterns: z.array(z.string()),
  metadata: z.record(z.string(), z.unknown()).optional(),
  from: z.object({ sessionId: id, partId: z.string().optional(), callId: z.string().optional() }).optional(),
})
/** commands (reply), fork settlement or a reject cascade. Closes the request. */
export const PermissionReplied = event('permission.replied', {
  requestId: id,
  reply: z.enum(['once', 'always', 'reject']),
  message: z.string().optional(),
})
/** commands (reply "always"). A durable session rule; listable and revocable. */
export const PermissionRuleAdded = event('permission.rule.added', { ruleId: id, rule: PermissionRule })
/** commands (revoke). */
export const PermissionRuleRemoved = event('permission.rule.removed', { ruleId: id })

// ── elicitation (an MCP server asks the user: docs/TOOLS.md "Elicitation") ─────────────────
/** A form field's value in an elicitation answer, as the MCP spec allows (string, number, boolean, string list). */
export const ElicitationValue = z.union([z.string(), z.number(), z.boolean(), z.array(z.string())])
export type ElicitationValue = z.infer<typeof ElicitationValue>
/**
 * runtime (src/runtime/elicitation/bridge.ts). An MCP server's `elicitation/create`, asked during the tool
 * call `partId`/`callId`: parked until an answer; Session becomes `waiting`. `requestedSchema` is the
 * server's flat form schema as it sent it (bounded in size before it is appended). Like a permission
 * request, a sub-agent's is raised in the top session of its chain, with `from` naming the child's call.
 */
export const ElicitationRequested = event('elicitation.requested', {
  elicitationId: id,
  server: z.string().min(1),
  message: z.string(),
  requestedSchema: z.record(z.string(), z.unknown()),
  partId: z.string().optional(),
  callId: z.string().optional(),
  from: z.object({ sessionId: id, partId: z.string().optional(), callId: z.string().optional() }).optional(),
})
/**
 * commands (answer), the runtime (the call was aborted) or settlement (recovery, fork). Closes the request:
 * `accept` with `content` (defaults applied, valid against the requested schema), `decline` or `cancel`.
 * Who answered is the envelope's meta (actor, by).
 */
export const ElicitationAnswered = event('elicitation.answered', {
  elicitationId: id,
  action: z.enum(['accept', 'decline', 'cancel']),
  content: z.record(z.string(), ElicitationValue).optional(),
  /** why the runtime or a settlement closed it (absent when a person answered) */
  reason: z.string().optional(),
})

// ── compaction ────────────────────────────────────────────────────────────
/** runtime or commands. A compaction is wanted; the reason says why. */
export const CompactionRequested = event('compaction.requested', {
  compactionId: id,
  reason: z.enum(['auto', 'overflow', 'manual']),
})
/** runtime. The compaction agent is summarising. */
export const CompactionStarted = event('compaction.started', { compactionId: id })
/** runtime. The model context now starts at the summary, then the tail. */
export const CompactionCompleted = event('compaction.completed', {
  compactionId: id,
  summaryMessageId: id,
  tailStartMessageId: z.string().optional(),
  tokensBefore: z.number().int().nonnegative(),
  tokensAfter: z.number().int().nonnegative(),
})
/** runtime or recovery. The compaction did not happen; the history is unchanged. */
export const CompactionFailed = event('compaction.failed', { compactionId: id, error: z.string() })
/**
 * runtime. The outputs of these completed tool calls are no longer sent to the model: each is replaced
 * by a short marker (docs/COMPACTION.md "Pruning"). The log and the page keep them. `tokens`: the
 * estimate of what the model is no longer sent.
 */
export const ContextPruned = event('context.pruned', {
  partIds: z.array(id).min(1).max(10_000),
  tokens: z.number().int().nonnegative(),
})

// ── sub-agents ────────────────────────────────────────────────────────────
/** runtime (task tool). A child session runs for a tool call. */
export const SubtaskStarted = event('subtask.started', { partId: id, callId: z.string(), childSessionId: id })
/** runtime (task tool). The child's run ended. */
export const SubtaskFinished = event('subtask.finished', {
  partId: id,
  callId: z.string(),
  childSessionId: id,
  outcome: RunOutcome,
})

// ── workspace ─────────────────────────────────────────────────────────────
/** A file's change between two snapshots of a workspace, with its line counts (none for a binary file). */
export const ChangedFile = z.object({
  path: z.string(),
  status: z.enum(['added', 'modified', 'deleted']),
  added: z.number().int().nonnegative().optional(),
  removed: z.number().int().nonnegative().optional(),
  binary: z.literal(true).optional(),
  /** over the size cap at one end or both: listed, not stored (session.diff only) */
  large: z.literal(true).optional(),
})
export type ChangedFile = z.infer<typeof ChangedFile>

/**
 * What HEAD named in the repository whose top level is the session
 * directory, read from its files (src/runtime/workspace/repository.ts): the
 * commit (absent on a branch with no commit yet) and the branch (absent when
 * detached). A fork's directory is made a repository at it
 * (docs/TIME-TRAVEL.md "Fork with files").
 */
export const GitHead = z.object({
  commit: z
    .string()
    .regex(/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/)
    .optional(),
  branch: z.string().min(1).max(244).optional(),
})
export type GitHead = z.infer<typeof GitHead>

/**
 * runtime. The session directory's files as recorded (docs/TIME-TRAVEL.md
 * "The workspace at any seq"): `tree` names a content-addressed snapshot;
 * `changed` is what differs from the session's previous snapshot. Taken at
 * the start of each step (`step`: changes found there were made outside the
 * agent), after each tool that may write (`tool`, naming its call), when a
 * resumed run starts (`recovery`) and around a revert. Files over the size
 * cap are listed in `large`, not stored. `git`: what HEAD named when the
 * directory is the top level of a repository (absent otherwise, and in
 * events recorded before it existed); a snapshot is recorded when it moved
 * though no file changed. Sets Session.workspace; a `tool` snapshot with
 * changes adds them to its message's `patch` part.
 */
export const WorkspaceSnapshotted = event('workspace.snapshotted', {
  tree: z.string().regex(/^[0-9a-f]{40}$/),
  reason: z.enum(['step', 'tool', 'recovery', 'revert']),
  messageId: id.optional(),
  partId: id.optional(),
  changed: z.array(ChangedFile),
  large: z.array(z.object({ path: z.string(), size: z.number().int().nonnegative() })).optional(),
  git: GitHead.optional(),
})

/**
 * command (session.revert / session.unrevert), or recovery (`handover`: a cluster node that claimed the session
 * writes its directory from its last recorded tree before the interrupted run resumes, docs/CLUSTER.md). A restore of the session
 * directory, as a recorded task: started → completed or failed, so a crash in
 * between is finished on restart (docs/TIME-TRAVEL.md "Revert"). `from` is the
 * directory as the restore began (recorded by the `workspace.snapshotted`
 * just before), `tree` what it is made to equal. A revert hides the
 * `messages` created after `to` from the model; an unrevert shows them again.
 * Sets Session.restoring.
 */
export const WorkspaceRestoreStarted = event('workspace.restore.started', {
  restoreId: id,
  kind: z.enum(['revert', 'unrevert', 'handover']),
  /** the seq reverted to (a revert only) */
  to: z.number().int().positive().optional(),
  from: z.string().regex(/^[0-9a-f]{40}$/),
  tree: z.string().regex(/^[0-9a-f]{40}$/),
  messages: z.array(id),
  /** the user overrode a conflict with files changed outside the agent */
  force: z.literal(true).optional(),
})

/**
 * command, or recovery. The directory now equals the restore's `tree`;
 * `changed` is what the restore changed. A revert becomes Session.revert
 * (its messages marked reverted); an unrevert clears it. Sets
 * Session.workspace to the tree.
 */
export const WorkspaceRestoreCompleted = event('workspace.restore.completed', {
  restoreId: id,
  changed: z.array(ChangedFile),
})

/** command, or recovery. The restore did not happen: the directory was put back to `from` (or is gone). */
export const WorkspaceRestoreFailed = event('workspace.restore.failed', {
  restoreId: id,
  error: z.object({ code: z.string(), message: z.string() }),
})

/**
 * command (input.submit after a revert). The revert is final: its messages
 * stay in the log, hidden from the model for good; unrevert is no longer
 * possible. Clears Session.revert.
 */
export const SessionRevertFinalized = event('session.revert.finalized', { restoreId: id })

/**
 * command (session.fork with files). The child's directory is being written
 * from the workspace `tree` at the fork point: a recorded task, finished on
 * restart after a crash. `git`: the parent's repository HEAD at the fork
 * point, which the directory is made a repository at. Sets
 * Session.materializing.
 */
export const WorkspaceMaterializeStarted = event('workspace.materialize.started', {
  tree: z.string().regex(/^[0-9a-f]{40}$/),
  directory: z.string(),
  git: GitHead.optional(),
})

/**
 * command, or recovery. The directory holds the tree, and is a repository at
 * `git` when that is set (absent: a plain directory, as the parent's was or
 * because its repository could not be borrowed from). Clears
 * Session.materializing; sets Session.workspace.
 */
export const WorkspaceMaterialized = event('workspace.materialized', {
  tree: z.string().regex(/^[0-9a-f]{40}$/),
  files: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  git: GitHead.optional(),
})

/** command, or recovery. The directory could not be written (and was removed); the session has no files. */
export const WorkspaceMaterializeFailed = event('workspace.materialize.failed', {
  error: z.object({ code: z.string(), message: z.string() }),
})

// ── todo ──────────────────────────────────────────────────────────────────
/** tools (todowrite). Replaces the session's todo list. */
export const TodoUpdated = event('todo.updated', {
  items: z.array(
    z.object({
      content: z.string(),
      status: z.enum(['pending', 'in_progress', 'completed', 'cancelled']),
      priority: z.enum(['high', 'medium', 'low']),
    }),
  ),
})

// ── tokens (the system stream `sys_tokens`: docs/SECURITY.md "Principals and tokens") ─────────────
export const Role = z.enum(['audit', 'operate', 'admin'])
export type Role = z.infer<typeof Role>
/**
 * an admin (the command). A named token: its role, the sessions it is limited to (and their forks and
 * sub-agents), its expiry, and its secret as a salted scrypt hash — never the secret itself.
 */
export const TokenCreated = event('token.created', {
  tokenId: id,
  name: z.string().min(1).max(100),
  role: Role,
  sessions: z.array(z.string().min(1)).optional(),
  expiresAt: z.iso.datetime().optional(),
  salt: z.string(),
  hash: z.string(),
})
/** an admin (the command). The token stops working at once; its open sockets are closed. */
export const TokenRevoked = event('token.revoked', { tokenId: id })
/** the roles a share may grant: never admin */
export const ShareRole = z.enum(['audit', 'operate'])
export type ShareRole = z.infer<typeof ShareRole>
/**
 * someone who operates the session (the command: docs/SECURITY.md "Shares"). A share link: whoever opens it
 * until `expiresAt` is a principal named `name` with `role`, limited to `session` (and its forks and
 * sub-agents). The link's secret is kept as its sha256 only (256 random bits: no dictionary to guess from).
 */
export const ShareCreated = event('share.created', {
  shareId: id,
  session: z.string().min(1),
  name: z.string().min(1).max(100),
  role: ShareRole,
  expiresAt: z.iso.datetime(),
  hash: z.string().regex(/^[0-9a-f]{64}$/),
})
/** someone who operates the session (the command). The link stops working; its open pages and sockets are closed. */
export const ShareRevoked = event('share.revoked', { shareId: id })

// ── MCP servers (the system stream `sys_mcp`: docs/TOOLS.md "Server state in the log") ─────────────
const sha256 = z.string().regex(/^[0-9a-f]{64}$/)
const mcpServer = z.string().min(1).max(200)
/** the MCP manager. An attempt to connect a configured server begins (1 at start, then each reconnect). */
export const McpServerConnecting = event('mcp.server.connecting', {
  server: mcpServer,
  attempt: z.number().int().positive(),
})
/**
 * the MCP manager. The server answered and listed its tools: their names as the model sees them, and
 * sha256 digests of the list (names, descriptions, input schemas) and of its instructions — never the
 * schemas themselves. Appended again when the server changes its tool list.
 */
export const McpServerReady = event('mcp.server.ready', {
  server: mcpServer,
  transport: z.enum(['stdio', 'streamable-http', 'sse']),
  /** at most the first 1000 names (a hostile server could list any number); `toolCount` says how many there are */
  tools: z.array(z.string().min(1).max(200)).max(1000),
  toolCount: z.number().int().nonnegative(),
  toolsDigest: sha256,
  instructionsDigest: sha256.optional(),
})
/**
 * the MCP manager. The attempt failed or the server went away; its tools are gone. `error` is scrubbed
 * (no token, header value or query string). `retryInMs`: when the next attempt starts; absent: none will.
 */
export const McpServerFailed = event('mcp.server.failed', {
  server: mcpServer,
  error: z.string().max(2000),
  retryInMs: z.number().int().nonnegative().optional(),
})
/** the MCP manager. The server wants a sign-in; it is not retried until someone signs in. */
export const McpServerAuthRequired = event('mcp.server.auth_required', {
  server: mcpServer,
  error: z.string().max(2000).optional(),
})
/** the MCP manager. Chronicle closed the connection (shutdown); no reconnect follows. */
export const McpServerDisconnected = event('mcp.server.disconnected', { server: mcpServer })

export const ChronicleEvent = z.discriminatedUnion('type', [
  SessionCreated,
  SessionForked,
  SessionRenamed,
  TokenCreated,
  TokenRevoked,
  ShareCreated,
  ShareRevoked,
  McpServerConnecting,
  McpServerReady,
  McpServerFailed,
  McpServerAuthRequired,
  McpServerDisconnected,
  TitleStarted,
  TitleFailed,
  SessionArchived,
  SessionUnarchived,
  SessionRulesChanged,
  SessionImported,
  SessionStranded,
  InputAccepted,
  InputDelivered,
  RunStarted,
  RunResumed,
  RunCancelRequested,
  RunFinished,
  MessageCreated,
  MessageCompleted,
  StepStarted,
  StepFinished,
  StepRetried,
  TextStarted,
  TextDelta,
  TextEnded,
  ReasoningStarted,
  ReasoningDelta,
  ReasoningEnded,
  ToolInputStarted,
  ToolInputDelta,
  ToolCalled,
  ToolProgressed,
  ToolNetwork,
  ToolCompleted,
  ToolFailed,
  PermissionRequested,
  PermissionReplied,
  PermissionRuleAdded,
  PermissionRuleRemoved,
  ElicitationRequested,
  ElicitationAnswered,
  CompactionRequested,
  CompactionStarted,
  CompactionCompleted,
  CompactionFailed,
  ContextPruned,
  SubtaskStarted,
  SubtaskFinished,
  TodoUpdated,
  WorkspaceSnapshotted,
  WorkspaceRestoreStarted,
  WorkspaceRestoreCompleted,
  WorkspaceRestoreFailed,
  SessionRevertFinalized,
  WorkspaceMaterializeStarted,
  WorkspaceMaterialized,
  WorkspaceMaterializeFailed,
])

export type ChronicleEvent = z.infer<typeof ChronicleEvent>
export type EventType = ChronicleEvent['type']
export type EventOf<T extends EventType> = Extract<ChronicleEvent, { type: T }>
export type DataOf<T extends EventType> = EventOf<T>['data']

export const EVENT_TYPES: readonly EventType[] = ChronicleEvent.options.map((o) => o.shape.type.value)

/** The schema version every event is written with; readers upcast older ones. */
export const CURRENT_SCHEMA_VERSION = 1
