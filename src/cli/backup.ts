import { resolve } from 'node:path'
import { flag, type Args, UsageError } from './args.js'
import { httpClient } from './client.js'
import type { Terminal } from './terminal.js'

/**
 * `chronicle backup --out <dir>`: the running server copies its store and
 * workspace objects into a new directory (docs/BACKUP.md) while it serves.
 * The path is the server's: the CLI resolves a relative one against its own
 * working directory, which is the same machine's in the usual setup.
 */
export async function backupCommand(args: Args, { line: out }: Terminal): Promise<number> {
  const target = flag(args, 'out')
  if (!target) throw new UsageError('backup needs --out <directory> (a new directory; the server writes it)')
  const backup = await httpClient().call('store.backup', { out: resolve(target) })
  out(`backup ${backup.directory}: seq ${backup.seq}, ${backup.events} events, ${backup.objects} workspace objects`)
  out(`head ${backup.seq}:${backup.digest}`)
  return 0
}
