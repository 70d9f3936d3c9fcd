import { flag, UsageError, type Args } from './args.js'
import { HttpClient, serverInfo } from './client.js'

/**
 * `chronicle token create|list|revoke` and `chronicle whoami`
 * (docs/API.md "Tokens"): the server's token commands over HTTP, with the
 * token the CLI finds (CHRONICLE_TOKEN, else the data dir's: the owner's).
 */

type Out = (line: string) => void

interface TokenInfo {
  tokenId: string
  name: string
  role: string
  sessions?: string[]
  expiresAt?: string
  createdAt: string
  createdBy?: string
  revokedAt?: string
}

const ROLES = ['audit', 'operate', 'admin']

export async function tokenCommand(args: Args, out: Out): Promise<number> {
  const [sub, ...rest] = args.positionals
  const http = new HttpClient(serverInfo())
  switch (sub) {
    case 'create': {
      const name = flag(args, 'name')
      const role = flag(args, 'role')
      if (!name) throw new UsageError('token create needs --name')
      if (!role || !ROLES.includes(role)) throw new UsageError(`token create needs --role ${ROLES.join('|')}`)
      const sessions = flag(args, 'sessions')
      const expires = flag(args, 'expires')
      const created = await http.request<TokenInfo & { token: string }>('POST', '/tokens', {
        name,
        role,
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
      const { tokens } = await http.request<{ tokens: TokenInfo[] }>('GET', '/tokens')
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
      const id = rest[0]
      if (!id) throw new UsageError('token revoke needs a token id (chronicle token list)')
      const revoked = await http.request<TokenInfo>('DELETE', `/tokens/${encodeURIComponent(id)}`)
      out(`revoked ${revoked.tokenId} (${revoked.name}) at ${revoked.revokedAt}`)
      return 0
    }
    default:
      throw new UsageError('token needs create, list or revoke')
  }
}

export async function whoamiCommand(_args: Args, out: Out): Promise<number> {
  const me = await new HttpClient(serverInfo()).request<{
    id: string
    name: string
    role: string
    sessions?: string[]
  }>('GET', '/whoami')
  out(`${me.name} (${me.id}): ${me.role}${me.sessions ? `, sessions ${me.sessions.join(',')}` : ', all sessions'}`)
  return 0
}
