import type { Role } from '../events/catalogue.js'
import { ChronicleError } from '../events/errors.js'
import type { EventStore } from '../events/store.js'
import { getSession } from '../projections/queries/read-model.js'
import type { Api, Caller, Method } from './api.js'
import type { Principal } from './principals.js'

/**
 * Authorization, in one place (docs/SECURITY.md "Principals and tokens"):
 * every protocol method — the same handlers serve HTTP and WebSocket — is
 * checked against the caller's role and session limit before its handler
 * runs, so a refused call decides nothing and appends nothing.
 *
 *   audit    read: list, get, state and context at a seq, history, files, diffs, rules, MCP servers, subscribe
 *   operate  audit, plus create, submit, cancel, permission replies, fork, compact, revert, archive
 *   admin    everything, plus tokens, revoking approval rules and backups
 *
 * A token limited to some sessions reaches those, their forks and their
 * sub-agents' sessions; it cannot create sessions or read the MCP servers'
 * state (the whole server's), and a list shows it only those.
 */

export const NEEDS: Record<Method | 'subscribe' | 'unsubscribe', Role> = {
  'session.list': 'audit',
  'session.get': 'audit',
  'session.state': 'audit',
  'session.context': 'audit',
  'session.history': 'audit',
  'session.export': 'audit',
  'session.files': 'audit',
  'session.diff': 'audit',
  'permission.rules': 'audit',
  whoami: 'audit',
  'mcp.servers': 'audit',
  subscribe: 'audit',
  unsubscribe: 'audit',
  'session.create': 'operate',
  'session.archive': 'operate',
  'session.update': 'operate',
  'input.submit': 'operate',
  'run.cancel': 'operate',
  'permission.reply': 'operate',
  'elicitation.answer': 'operate',
  'session.fork': 'operate',
  'session.compact': 'operate',
  'session.revert': 'operate',
  'session.unrevert': 'operate',
  'permission.revoke': 'admin',
  'token.create': 'admin',
  'token.list': 'admin',
  'token.revoke': 'admin',
  'store.backup': 'admin',
}

const RANK: Record<Role, number> = { audit: 0, operate: 1, admin: 2 }

/** Whether a principal reaches a session: no limit, or one of its sessions up the fork and sub-agent chain. */
export function reaches(store: EventStore, principal: Principal, sessionId: string): boolean {
  const allowed = principal.sessions
  if (!allowed) return true
  const seen = new Set<string>()
  for (let id: string | undefined = sessionId; id !== undefined && !seen.has(id); ) {
    if (allowed.includes(id)) return true
    seen.add(id)
    const s = getSession(store, id)
    id = s?.forkedFrom?.sessionId ?? s?.parent?.sessionId
  }
  return false
}

/** FORBIDDEN unless the caller may call `method` with these params. */
export function authorize(store: EventStore, caller: Caller, method: keyof typeof NEEDS, params: unknown): void {
  const { principal } = caller
  const need = NEEDS[method]
  if (RANK[principal.role] < RANK[need])
    throw new ChronicleError(
      'FORBIDDEN',
      `${method} needs the ${need} role; token ${principal.name} has ${principal.role}`,
    )
  if (!principal.sessions) return
  if (method === 'session.create')
    throw new ChronicleError('FORBIDDEN', `token ${principal.name} is limited to some sessions: it cannot create one`)
  if (method === 'store.backup')
    // a backup holds every session
    throw new ChronicleError(
      'FORBIDDEN',
      `token ${principal.name} is limited to some sessions: it cannot back up the store`,
    )
  if (method === 'mcp.servers')
    // the tool servers and what they offer are the whole server's, not some sessions'
    throw new ChronicleError(
      'FORBIDDEN',
      `token ${principal.name} is limited to some sessions: it cannot read the server's MCP servers`,
    )
  const sessions = sessionsNamed(params)
  for (const id of sessions) {
    if (!reaches(store, principal, id))
      throw new ChronicleError('FORBIDDEN', `token ${principal.name} does not reach session ${id}`)
  }
}

function sessionsNamed(params: unknown): string[] {
  if (typeof params !== 'object' || params === null) return []
  const p = params as { session?: unknown; sessions?: unknown }
  const out: string[] = []
  if (typeof p.session === 'string') out.push(p.session)
  if (Array.isArray(p.sessions)) for (const s of p.sessions) if (typeof s === 'string') out.push(s)
  return out
}

/** The API with every method authorized first; a limited token's session list shows only what it reaches. */
export function guarded(api: Api, store: EventStore): Api {
  const out = {} as Record<string, (params: unknown, caller: Caller) => unknown>
  for (const [method, handler] of Object.entries(api) as [Method, (p: unknown, c: Caller) => unknown][]) {
    out[method] = (params, caller) => {
      authorize(store, caller, method, params)
      return handler(params, caller)
    }
  }
  const list = out['session.list'] as (p: unknown, c: Caller) => unknown
  out['session.list'] = (params, caller) => {
    const result = list(params, caller) as { sessions: { id: string }[] }
    if (!caller.principal.sessions) return result
    return { ...result, sessions: result.sessions.filter((s) => reaches(store, caller.principal, s.id)) }
  }
  return out as unknown as Api
}
