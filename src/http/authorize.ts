import type { Role } from '../events/catalogue.js'
import { ChronicleError } from '../events/errors.js'
import type { ReadModels } from '../projections/read-models.js'
import type { Api, Caller, Method } from './api.js'
import type { Principal } from './principals.js'

/**
 * Authorization, in one place (docs/SECURITY.md "Principals and tokens"):
 * every protocol method — the same handlers serve HTTP and WebSocket — is
 * checked against the caller's role and session limit before its handler
 * runs, so a refused call decides nothing and appends nothing.
 *
 *   audit    read: list, get, state and context at a seq, history, files, diffs, rules, MCP servers, search, subscribe
 *   operate  audit, plus create, submit, cancel, permission replies, fork, compact, revert, archive
 *   admin    everything, plus tokens, revoking approval rules and backups
 *
 * A token limited to some sessions reaches those, their forks and their
 * sub-agents' sessions; it cannot create sessions or read the MCP servers'
 * state (the whole server's), and a list and a search show it only those.
 *
 * A share link's visitor (docs/SECURITY.md "Shares") is such a principal,
 * limited to the shared session, and besides: it manages no shares (a link
 * passes on no further) and forks only into the server's own forks
 * directory, never a directory it names.
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
  search: 'audit',
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
  'share.create': 'operate',
  'share.list': 'operate',
  'share.revoke': 'operate',
  'store.backup': 'admin',
}

const RANK: Record<Role, number> = { audit: 0, operate: 1, admin: 2 }

/** What authorization reads: a session, with every append made to it before (src/projections/read-models.ts). */
export type SessionReader = Pick<ReadModels, 'session'>

/** Whether a principal reaches a session: no limit, or one of its sessions up the fork and sub-agent chain. */
export async function reaches(sessions: SessionReader, principal: Principal, sessionId: string): Promise<boolean> {
  const allowed = principal.sessions
  if (!allowed) return true
  const seen = new Set<string>()
  for (let id: string | undefined = sessionId; id !== undefined && !seen.has(id); ) {
    if (allowed.includes(id)) return true
    seen.add(id)
    const s = await sessions.session(id)
    id = s?.forkedFrom?.sessionId ?? s?.parent?.sessionId
  }
  return false
}

/** FORBIDDEN unless the caller may call `method` with these params. */
export async function authorize(
  sessions: SessionReader,
  caller: Caller,
  method: keyof typeof NEEDS,
  params: unknown,
): Promise<void> {
  const { principal } = caller
  const need = NEEDS[method]
  if (RANK[principal.role] < RANK[need])
    throw new ChronicleError(
      'FORBIDDEN',
      `${method} needs the ${need} role; token ${principal.name} has ${principal.role}`,
    )
  if (principal.share) {
    if (method === 'share.create' || method === 'share.list' || method === 'share.revoke')
      throw new ChronicleError('FORBIDDEN', `share ${principal.name} cannot manage shares`)
    if (method === 'session.fork' && typeof (params as { directory?: unknown })?.directory === 'string')
      throw new ChronicleError('FORBIDDEN', `share ${principal.name} cannot fork into a directory of its choosing`)
  }
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
  for (const id of sessionsNamed(params)) {
    if (!(await reaches(sessions, principal, id)))
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
export function guarded(api: Api, sessions: SessionReader): Api {
  const out = {} as Record<string, (params: unknown, caller: Caller) => unknown>
  for (const [method, handler] of Object.entries(api) as [Method, (p: unknown, c: Caller) => unknown][]) {
    out[method] = async (params, caller) => {
      await authorize(sessions, caller, method, params)
      return handler(params, caller)
    }
  }
  const list = out['session.list'] as (p: unknown, c: Caller) => Promise<unknown>
  out['session.list'] = async (params, caller) => {
    const result = (await list(params, caller)) as { sessions: { id: string }[] }
    if (!caller.principal.sessions) return result
    const reached = await Promise.all(result.sessions.map((s) => reaches(sessions, caller.principal, s.id)))
    return { ...result, sessions: result.sessions.filter((_, i) => reached[i]) }
  }
  return out as unknown as Api
}
