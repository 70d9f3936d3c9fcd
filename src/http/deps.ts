import type { ClusterNode } from '../events/cluster.js'
import type { LoginCodes } from './login-codes.js'
import type { Principals } from './principals.js'
import type { WebSessions } from './web-sessions.js'
import type { Logger } from 'pino'
import type { IdSource } from '../events/ids.js'
import type { StorePorts } from '../projections/store-ports.js'
import type { TimeTravel } from '../projections/time-travel/port.js'
import type { ResolvedLimits } from '../config.js'
import type { SubmitContext } from '../commands/input.js'
import type { ModelContext } from '../runtime/runtime.js'
import type { WorkspaceHistory } from '../runtime/workspace/history.js'
import type { WorkspaceForks } from '../runtime/workspace/forks.js'
import type { WorkspaceRestorer } from '../runtime/workspace/restore.js'
import type { McpSignInCallback } from '../tools/mcp/oauth-callback.js'
import type { Backups } from '../runtime/backup/take.js'
import type { Search } from '../projections/search/port.js'
import type { InboundTracing } from '../observability/inbound.js'

/**
 * What the HTTP/WebSocket layer needs from the rest of Chronicle. Commands
 * (src/commands/) are called directly — they are the write path; the runtime
 * is only told to look at a session again. The composition root
 * (src/main.ts) adapts the runtime and time travel to these ports; a port
 * left undefined answers NOT_IMPLEMENTED so every route exists whatever has
 * been wired.
 */

export interface RuntimePort {
  /** look at the session again: start a run if input (or a compaction) waits */
  wake(sessionId: string): void
  /**
   * resolves when the session has no run in progress and nothing waiting in its inbox; on a cluster, for a
   * session another node runs, once its run has answered `input`
   */
  idle(sessionId: string, input?: { readonly inputId: string; readonly seq: number }): Promise<void>
  /** brings every run to a safe point */
  stop(): Promise<void>
}

/** What the model is (or was, at a seq) sent: the runtime's own description of a request. */
export type { ModelContext }

/** The web page and its login (docs/API.md "Web page"). */
export interface WebDeps {
  /** the built page: `index.html` and `assets/` (src/http/web-root.ts) */
  readonly root: string
  /** one-time login links (in memory) */
  readonly codes: LoginCodes
  /** the page's cookie sessions (durable) */
  readonly sessions: WebSessions
}

/** The server's Prometheus metrics (src/observability/metrics.ts, docs/OBSERVABILITY.md). */
export interface MetricsPort {
  readonly contentType: string
  render(): Promise<string>
  /** how to read the app's sockets at a scrape: connections open, and each subscription's lag in events */
  sockets(read: () => { readonly connections: number; readonly lags: readonly number[] }): void
  slowConsumerDropped(): void
}

export interface AppDeps {
  /** the store as its ports (src/projections/store-ports.ts): every read and write of this layer goes through them */
  readonly ports: StorePorts
  /**
   * since when appends are refused for want of disk space (an embedded store's data directory), or undefined:
   * what /health reports; absent, the store has no such state
   */
  readonly storageFull?: () => { readonly since: string } | undefined
  readonly ids: IdSource
  readonly logger: Logger
  /** `GET /cluster`: this node's cluster (docs/CLUSTER.md); absent: a server of its own */
  readonly cluster?: ClusterPort
  /** `GET /metrics` for an admin token; absent: metrics are off */
  readonly metrics?: MetricsPort
  /** spans of requests and socket calls (src/observability/inbound.ts); absent: traces are off */
  readonly tracing?: InboundTracing
  readonly security: {
    readonly token: string
    /** host names (without port) a Host header may carry; loopback names are always allowed */
    readonly allowedHosts: readonly string[]
    /** extra origins a browser page may come from (exact `scheme://host:port`) */
    readonly allowedOrigins: readonly string[]
  }
  readonly limits: ResolvedLimits
  /** defaults for session.create */
  readonly defaults: { readonly directory: string; readonly agent: string; readonly model: string | null }
  readonly version: string
  readonly runtime?: RuntimePort
  /** what the submit command needs (the runtime's input index, agents and models) */
  readonly submit?: SubmitContext
  /** a session at any seq, its history paged (src/projections/time-travel/port.ts) */
  readonly timeTravel?: TimeTravel
  readonly context?: (sessionId: string, at?: number) => Promise<ModelContext> | ModelContext
  /** the workspace at any seq: files, file contents, diffs (docs/TIME-TRAVEL.md) */
  readonly workspace?: WorkspaceHistory
  /** fork with files: the child's own directory written from the workspace at the fork point */
  readonly forks?: WorkspaceForks
  /** Chronicle's data dir: no session directory may lie inside it (a fork's own under forks/ excepted) */
  readonly dataDir?: string
  /** named tokens and who they speak for (src/http/principals.ts: opened on the log with the owner's token) */
  readonly principals?: Principals
  /** revert and unrevert of the session directory (docs/TIME-TRAVEL.md "Revert") */
  readonly restorer?: WorkspaceRestorer
  /** agents that session.create accepts */
  readonly agents?: ReadonlySet<string>
  /** the web page, its login links and cookie sessions; absent (`web: false`): no page, and no cookie is accepted */
  readonly web?: WebDeps
  /** completes a remote MCP server's browser sign-in (GET /mcp/oauth/callback); absent: no callback served */
  readonly mcpSignIn?: McpSignInCallback
  /**
   * MCP servers waiting for a browser sign-in now: name → the authorization URL to open. Shown to
   * admins only (mcp.servers): the URL's `state` is what lets a callback in, so whoever holds it
   * could sign the server in to an account of their own.
   */
  readonly mcpSignIns?: () => ReadonlyMap<string, string>
  /** backups of the running store (docs/BACKUP.md); absent: NOT_IMPLEMENTED */
  readonly backups?: Backups
  /** full-text search over every session (docs/SEARCH.md); absent: NOT_IMPLEMENTED */
  readonly search?: Search
}

/** The cluster this server is a node of (src/runtime/cluster/membership.ts). */
export interface ClusterPort {
  /** this node's id */
  readonly node: string
  nodes(): Promise<ClusterNode[]>
}
