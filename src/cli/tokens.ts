import { ChronicleError } from '../events/errors.js'
import { flag, UsageError, type Args } from './args.js'
import { httpClient } from './client.js'
import type { Terminal } from './terminal.js'

/**
 * `chronicle token create|list|revoke` and `chronicle whoami`
 * (docs/API.md "Tokens"): the server's token commands over HTTP, with the
 * token the CLI finds (CHRONICLE_TOKEN, else the data dir's: the owner's).
 */

const ROLES: readonly string[] = ['audit', 'operate', 'admin']

export async function tokenCommand(args: Args, { line: out }: Terminal): Promise<number> {
  const [sub, ...rest] = args.positionals
  const http = httpClient()
  switch (sub) {
    case 'create': {
      const name = flag(args, 'name')
      const role = flag(args, 'role')
      if (!name) throw new UsageError('token create needs --name')
      if (!role || !ROLES.includes(role)) throw new UsageError(`token create needs --role ${ROLES.join('|')}`)
      const sessions = flag(args, 'sessions')
      const expires = flag(args, 'expires')
      const created = await http.call('token.create', {
        name,
        role: role as 'audit' | 'operate' | 'admin',
        ...(sessions && {
          sessions: sessions
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
        }),
        ...(expires && { expires }),
      })
      out(created.token)
      process.stderr.write(
        `token ${created.tokenId} (${created.name}, ${created.role}${created.sessions ? `, sessions ${created.sessions.join(',')}` : ''}${created.expiresAt ? `, expires ${created.expiresAt}` : ''}): shown once, keep it now\n`,
      )
      return 0
    }
    case 'list': {
      const { tokens } = await http.call('token.list', {})
      if (tokens.length === 0) out('(no tokens besides the owner’s)')
      for (const t of tokens) {
        const state = t.revokedAt
          ? `revoked ${t.revokedAt}`
          : t.expiresAt && Date.parse(t.expiresAt) <= Date.now()
            ? `expired ${t.expiresAt}`
            : 'active'
        out(
          `${t.tokenId}  ${t.name}  ${t.role}  ${t.sessions ? `sessions ${t.sessions.join(',')}` : 'all sessions'}  ${state}${t.expiresAt && state === 'active' ? ` until ${t.expiresAt}` : ''}  by ${t.createdBy ?? '?'} ${t.createdAt}`,
        )
      }
      return 0
    }
    case 'revoke': {
      const ref = rest[0]
      if (!ref) throw new UsageError('token revoke needs a token’s name or id (chronicle token list)')
      const revoked = await http.call('token.revoke', { tokenId: await tokenIdOf(http, ref) })
      out(`revoked ${revoked.tokenId} (${revoked.name}) at ${revoked.revokedAt}`)
      return 0
    }
    default:
      throw new UsageError('token needs create, list or revoke')
  }
}

/**
 * The id of the token `ref` names: its id, else its name (names are unique
 * among active tokens: TOKEN_NAME_TAKEN). A name only revoked tokens had
 * names the latest of them, which the server answers TOKEN_REVOKED.
 */
async function tokenIdOf(http: ReturnType<typeof httpClient>, ref: string): Promise<string> {
  const { tokens } = await http.call('token.list', {})
  if (tokens.some((t) => t.tokenId === ref)) return ref
  const named = tokens.filter((t) => t.name === ref)
  const chosen = named.find((t) => !t.revokedAt) ?? named.at(-1)
  if (!chosen)
    throw new ChronicleError('TOKEN_NOT_FOUND', `no token named ${ref} or with that id (chronicle token list)`)
  return chosen.tokenId
}

export async function whoamiCommand(_args: Args, { line: out }: Terminal): Promise<number> {
  const me = await httpClient().call('whoami', {})
  out(`${me.name} (${me.id}): ${me.role}${me.sessions ? `, sessions ${me.sessions.join(',')}` : ', all sessions'}`)
  return 0
}
