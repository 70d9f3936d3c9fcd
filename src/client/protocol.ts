import type { z } from 'zod'
import type { Params } from '../http/api.js'
import type { PermissionRule } from '../events/catalogue.js'
import type { StoredEvent } from '../events/envelope.js'
import type { McpServerAt } from '../projections/queries/mcp-servers.js'
import type { Message, Part, Session, SessionRule } from '../projections/fold/model.js'
import type { SearchPage } from '../projections/search/port.js'

/**
 * The protocol's methods with their params and results (docs/API.md), shared
 * by the HTTP and WebSocket clients: a call names the same method over either
 * transport. Types only: nothing of the server is loaded.
 */

export type { Message, Part, PermissionRule, Session, SessionRule }

/** The methods only a WebSocket has. */
export interface SocketParams {
  hello: { protocol: 1 }
  subscribe: { sessions: readonly string[] | '*'; after?: number; types?: readonly string[] }
  unsubscribe: { sub: string }
}

export type Method = keyof typeof Params | keyof SocketParams
/** the methods with an HTTP route */
export type HttpMethod = keyof typeof Params
export type ParamsOf<M extends Method> = M extends keyof typeof Params
  ? z.input<(typeof Params)[M]>
  : M extends keyof SocketParams
    ? SocketParams[M]
    : never

/** An event of a history page; `inherited`: a fork's event that belongs to its parent's history. */
export type HistoryEvent = StoredEvent & { readonly inherited?: true }

/** An event as a subscription delivers it. */
export interface EventFrame {
  readonly type: 'event'
  readonly sub: string
  readonly seq: number
  readonly session: string
  readonly version: number
  readonly event: {
    readonly type: string
    readonly data: Record<string, unknown>
    readonly at: string
    readonly meta?: Record<string, unknown>
  }
}

export interface StateView {
  readonly session: Session
  readonly messages: readonly Message[]
  readonly parts: readonly Part[]
  readonly seq: number
  /** present when `last` cut the messages: how many the state holds */
  readonly messageCount?: number
}

export interface TokenInfo {
  readonly tokenId: string
  readonly name: string
  readonly role: string
  readonly sessions?: string[]
  readonly expiresAt?: string
  readonly createdAt: string
  readonly createdBy?: string
  readonly revokedAt?: string
}

export interface ShareInfo {
  readonly shareId: string
  readonly session: string
  readonly name: string
  readonly role: 'audit' | 'operate'
  readonly expiresAt: string
  readonly createdAt: string
  readonly createdBy?: string
  readonly revokedAt?: string
}

export interface Accepted {
  readonly inputId: string
  readonly seq: number
  readonly duplicate: boolean
}

export interface FileEntry {
  readonly path: string
  readonly size: number
  readonly type: string
}

export interface FilesView {
  readonly seq: number
  readonly tree: string | null
  readonly snapshotSeq: number | null
  readonly files: readonly FileEntry[]
}

export interface FileContent {
  readonly content: string
  readonly encoding: 'utf8' | 'base64'
}

export interface DiffView {
  readonly files: readonly { path: string; status: string; added?: number; removed?: number; binary?: boolean }[]
  readonly patch: string
}

export interface RestoreAnswer {
  readonly tree: string
  readonly changed: readonly { path: string; status: string }[]
  readonly messages: readonly string[]
}

/** A backup taken (docs/BACKUP.md): where, at which seq, with the head digest there. */
export interface BackupResult {
  readonly directory: string
  readonly seq: number
  readonly digest: string
  readonly events: number
  readonly objects: number
  readonly bytes: number
  readonly ms: number
  readonly copyMs: number
  readonly checkMs: number
  readonly objectsMs: number
}

/** A search hit (docs/SEARCH.md "Results"); open it with `session.state {session, at: seq}`. */
export type { SearchHit, SearchPage } from '../projections/search/port.js'

export interface Results {
  hello: { protocol: number; server: { version: string }; head: number }
  subscribe: { sub: string; head: number }
  unsubscribe: Record<string, never>
  'session.create': { session: Session }
  'session.list': { sessions: Session[]; cursor?: string }
  'session.get': { session: Session }
  'session.archive': Record<string, never>
  'session.update': { session: Session }
  'input.submit': Accepted
  'run.cancel': { cancelled: boolean }
  'permission.reply': Record<string, never>
  'permission.rules': { rules: SessionRule[]; configured: PermissionRule[] }
  'permission.revoke': Record<string, never>
  'elicitation.answer': Record<string, never>
  'session.fork': { session: Session }
  'session.state': StateView
  'session.context': Record<string, unknown>
  'session.history': { events: HistoryEvent[]; next?: number }
  'session.compact': { compactionId: string; seq: number; duplicate: boolean }
  /** `atif` with `format: 'atif'` (an ATIF v1.6 trajectory: docs/API.md "ATIF export") */
  'session.export': { jsonl: string; atif?: undefined } | { atif: Record<string, unknown>; jsonl?: undefined }
  'session.files': FilesView | FileContent
  'session.diff': DiffView
  'session.revert': RestoreAnswer
  'session.unrevert': RestoreAnswer
  'token.create': TokenInfo & { token: string }
  'token.list': { tokens: TokenInfo[] }
  'token.revoke': TokenInfo
  /** `url` over HTTP only (the route knows the address it was reached at) */
  'share.create': ShareInfo & { code: string; path: string; url?: string }
  'share.list': { shares: ShareInfo[] }
  'share.revoke': ShareInfo
  whoami: {
    id: string
    name: string
    role: string
    sessions?: string[]
    share?: { session: string; by?: string; expiresAt: string }
  }
  /** `authorizationUrl`: now, to admins, for a server waiting for a browser sign-in */
  'store.backup': BackupResult
  search: SearchPage
  'mcp.servers': { seq: number; servers: readonly (McpServerAt & { readonly authorizationUrl?: string })[] }
}

export type ResultOf<M extends Method> = Results[M]
