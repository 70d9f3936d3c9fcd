import type { EventStore } from '../events/store.js'
import type { Message, Part, Session, SessionView } from './fold/model.js'
import {
  childSessionIds,
  getMessage,
  getMessages,
  getParts,
  getSession,
  listSessions,
  loadView,
  type SessionPage,
  sessionIds,
  sessionsWithOpenWork,
  sessionStatusCounts,
  sessionsWithWorkspaceTask,
} from './queries/read-model.js'
import { liveSessionDirectories } from './queries/session-directories.js'

/**
 * The read models as a port (docs/ARCHITECTURE.md "The store port"): every
 * query the code makes of the Session / Message / Part read models,
 * asynchronous because PostgreSQL answers over the network. Each read sees
 * every append made to its session before it (read-your-writes; a list, every
 * session's). SQLite's answer at once (`sqliteReadModels`, over
 * src/projections/queries/); PostgreSQL's on its pool (`postgresReadModels`,
 * src/projections/postgres/read-models.ts). One contract suite runs on both
 * (test/projections/read-models-contract.ts).
 */
export interface ReadModels {
  /** `committed`: as committed, without waiting on what is queued (for what nothing queued can change) */
  session(sessionId: string, opts?: { committed?: boolean }): Promise<Session | undefined>
  message(sessionId: string, messageId: string): Promise<Message | undefined>
  messages(sessionId: string): Promise<Message[]>
  /** the session's parts, of one message when given */
  parts(sessionId: string, messageId?: string): Promise<Part[]>
  /**
   * the session, its messages and parts, as one view; `committed`: as committed, without waiting on what is
   * still queued (a reader that hears the rest as it commits: src/runtime/loop/session-views.ts)
   */
  view(sessionId: string, opts?: { committed?: boolean }): Promise<SessionView>
  /** sessions, most recently active first, in keyset pages (the cursor is opaque) */
  list(opts?: { cursor?: string; limit?: number; archived?: boolean }): Promise<SessionPage>
  /** every sub-agent child session */
  childSessionIds(): Promise<string[]>
  /** sessions with a run open, input waiting or a compaction requested: what recovery looks at */
  sessionsWithOpenWork(): Promise<string[]>
  /** sessions whose files a crash left mid-task (a restore, a fork's materialization) */
  sessionsWithWorkspaceTask(): Promise<string[]>
  /** every session with a read model */
  sessionIds(): Promise<string[]>
  /** the directories of sessions that can run: neither archived nor imported */
  liveSessionDirectories(): Promise<string[]>
  /** how many sessions are in each status, archived or not: what a metrics scrape reads (docs/OBSERVABILITY.md) */
  statusCounts(): Promise<{ status: string; archived: boolean; count: number }[]>
  /** forgets what it caches in memory of sessions idle for a while (the runtime calls it while the server is quiet) */
  sweep(): void
}

/** SQLite's read models as the port: its synchronous queries, read your writes (EventStore.reader). */
export function sqliteReadModels(store: EventStore): ReadModels {
  return {
    session: async (sessionId, opts) => getSession(opts?.committed ? store.asCommitted : store, sessionId),
    message: async (sessionId, messageId) => getMessage(store, sessionId, messageId),
    messages: async (sessionId) => getMessages(store, sessionId),
    parts: async (sessionId, messageId) => getParts(store, sessionId, messageId),
    view: async (sessionId, opts) => loadView(opts?.committed ? store.asCommitted : store, sessionId),
    list: async (opts) => listSessions(store, opts),
    childSessionIds: async () => childSessionIds(store),
    sessionsWithOpenWork: async () => sessionsWithOpenWork(store),
    sessionsWithWorkspaceTask: async () => sessionsWithWorkspaceTask(store),
    sessionIds: async () => sessionIds(store),
    liveSessionDirectories: async () => liveSessionDirectories(store),
    statusCounts: async () => sessionStatusCounts(store),
    sweep: () => store.sweep(),
  }
}
