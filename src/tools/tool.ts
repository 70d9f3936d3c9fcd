import type { z } from 'zod'
import type { Attachment, NetworkUse, PermissionRule, ToolErrorKind } from '../events/catalogue.js'

/**
 * The tool contract (docs/TOOLS.md). A tool validates nothing itself: the runtime
 * parses `args` with `parameters` before `execute` runs, so a bad call never
 * has a side effect. Tools ask for permission *inside* execute, through ctx.
 */

export interface PermissionAsk {
  readonly permission: string
  /** what the rules match against, e.g. the bash command or the file path */
  readonly patterns: readonly string[]
  /** what an "always" reply approves (e.g. `git status *` for `git status -s`); defaults to `patterns` */
  readonly always?: readonly string[]
  /** a person must answer even where the rules allow (a deny still denies): e.g. a command that cannot be sandboxed */
  readonly requireUser?: boolean
  readonly metadata?: Record<string, unknown>
  /** ends the wait (the request is closed as abandoned) before the call ends: e.g. the command that needed it exited */
  readonly signal?: AbortSignal
}

export interface ToolContext {
  readonly sessionId: string
  readonly messageId: string
  readonly callId: string
  readonly partId: string
  readonly agent: string
  /** the session's working directory (tools resolve paths against it) */
  readonly directory: string
  readonly abort: AbortSignal
  /** live metadata, recorded as tool.progressed */
  progress(metadata: Record<string, unknown>): void
  /** what the call's connections to one host got (the sandbox's proxy), recorded as tool.network */
  network?(use: NetworkUse): void
  /** resolves when allowed; rejects with ToolFailure {kind: 'denied'} when denied or rejected */
  ask(request: PermissionAsk): Promise<void>
  /** what the rules say now, without asking (e.g. which files a search may open without the user) */
  check(request: PermissionAsk): PermissionDecision
}

/** The outcome of the rules for a request: allowed, denied, or the user must be asked. */
export type PermissionDecision = 'allow' | 'deny' | 'ask'

export interface ToolResult {
  readonly output: string
  readonly title?: string
  readonly metadata?: Record<string, unknown>
  readonly attachments?: readonly Attachment[]
}

export interface Tool<P extends z.ZodType = z.ZodType> {
  readonly id: string
  readonly description: string
  readonly parameters: P
  /** the permission that governs this tool; a tool whose rules deny every pattern of it is hidden */
  readonly permission?: string
  /** it may change files in the workspace: the runtime records the workspace after each call (docs/TIME-TRAVEL.md) */
  readonly writes?: boolean
  /** its wall-clock budget for these arguments (default: the runtime's); waiting for permission does not count */
  readonly budgetMs?: (args: z.infer<P>) => number
  execute(args: z.infer<P>, ctx: ToolContext): Promise<ToolResult>
}

/**
 * A tool failure that carries the kind recorded in tool.failed. Any other throw is kind `failed`.
 * `code`, when set, is a stable name for the cause (`FILE_CHANGED_SINCE_READ`, …) that a tool
 * may put in its message (apply_patch and multiedit do: docs/TOOLS.md).
 */
export class ToolFailure extends Error {
  override readonly name = 'ToolFailure'
  constructor(
    readonly kind: ToolErrorKind,
    message: string,
    readonly code?: string,
  ) {
    super(message)
  }
}

/** What the loop asks of the tool set each step. */
export interface ToolRegistry {
  /** the tools offered to `agent` in `sessionId` this step (denied-everything tools already hidden) */
  tools(scope: {
    sessionId: string
    agent: string
    /** the session's configured rules (Session.rules) */
    rules?: readonly PermissionRule[]
  }): Promise<readonly Tool[]> | readonly Tool[]
}

/** Builds a tool with its parameter types inferred. */
export function defineTool<P extends z.ZodType>(tool: Tool<P>): Tool<P> {
  return tool
}

/** Scope of a permission check: who asks, for which call. */
export interface PermissionScope {
  readonly sessionId: string
  readonly agent: string
  readonly messageId?: string
  readonly callId?: string
  readonly partId?: string
  readonly abort: AbortSignal
}

/**
 * The permission interface the runtime and tools use (the tools issue
 * implements it with rules, durable approvals and parked requests).
 */
export interface PermissionGate {
  /** resolves when allowed; rejects with ToolFailure {kind: 'denied'} (message: the user's reject message, if any) */
  ask(scope: PermissionScope, request: PermissionAsk): Promise<void>
  /**
   * The rules of the scope's session (and its sub-agent chain) as they stand now, to decide requests at once
   * without asking or recording anything: a tool's `ctx.check` (src/runtime/loop/tool-exec.ts reads them again
   * after each `ask`, so an "always" given there counts).
   */
  checker(scope: PermissionScope): Promise<PermissionChecker>
}

/** The decision the rules give a request, without asking or recording anything. */
export type PermissionChecker = (request: PermissionAsk) => PermissionDecision
