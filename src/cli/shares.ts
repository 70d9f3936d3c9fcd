import { flag, UsageError, type Args } from './args.js'
import { httpClient } from './client.js'
import type { Terminal } from './terminal.js'

/**
 * `chronicle share <session> | share list | share revoke <id>` (docs/API.md
 * "Shares"): the server's share commands over HTTP, with the token the CLI
 * finds. The link is printed once, alone on stdout, so it can be piped.
 */

const ROLES: readonly string[] = ['audit', 'operate']

export async function shareCommand(args: Args, { line: out }: Terminal, { line: note }: Terminal): Promise<number> {
  const [first, ...rest] = args.positionals
  const http = httpClient()
  switch (first) {
    case undefined:
      throw new UsageError('share needs a session, list, or revoke <shareId>')
    case 'list': {
      const session = flag(args, 'session')
      const { shares } = await http.call('share.list', session ? { session } : {})
      if (shares.length === 0) out('(no shares)')
      for (const s of shares) {
        const state = s.revokedAt
          ? `revoked ${s.revokedAt}`
          : Date.parse(s.expiresAt) <= Date.now()
            ? `expired ${s.expiresAt}`
            : `active until ${s.expiresAt}`
        out(`${s.shareId}  ${s.session}  ${s.name}  ${s.role}  ${state}  by ${s.createdBy ?? '?'} ${s.createdAt}`)
      }
      return 0
    }
    case 'revoke': {
      const id = rest[0]
      if (!id) throw new UsageError('share revoke needs a share id (chronicle share list)')
      const revoked = await http.call('share.revoke', { shareId: id })
      out(`revoked ${revoked.shareId} (${revoked.name}) at ${revoked.revokedAt}: its open pages were closed`)
      return 0
    }
    default: {
      const role = flag(args, 'role')
      if (role !== undefined && !ROLES.includes(role)) throw new UsageError(`share --role is ${ROLES.join(' or ')}`)
      const name = flag(args, 'name')
      const expires = flag(args, 'expires')
      const created = await http.call('share.create', {
        session: first,
        ...(role && { role: role as 'audit' | 'operate' }),
        ...(name && { name }),
        ...(expires && { expires }),
      })
      out(created.url ?? created.path)
      note(
        `share ${created.shareId} (${created.name}, ${created.role}, until ${created.expiresAt}): whoever opens the link sees ${created.session}; revoke with chronicle share revoke ${created.shareId}`,
      )
      return 0
    }
  }
}
