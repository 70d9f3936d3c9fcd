import type { FileContent, FilesView, RestoreAnswer } from '../client/protocol.js'
import { flag, intFlag, UsageError, type Args } from './args.js'
import { httpClient } from './client.js'
import { paintDiff } from './render.js'
import type { Terminal } from './terminal.js'

/**
 * `chronicle files`, `diff`, `revert` and `unrevert`: a session's workspace at
 * any seq, and the session directory brought back to one (docs/TIME-TRAVEL.md).
 */

/** `files <session> [--at <seq>] [--path <file>]`: the file list, or one file's content. */
export async function filesCommand(args: Args, { line: out, write }: Terminal): Promise<number> {
  const id = args.positionals[0]
  if (!id) throw new UsageError('files needs a session id')
  const at = intFlag(args, 'at')
  const path = flag(args, 'path')
  const answer = await httpClient().call('session.files', {
    session: id,
    ...(at !== undefined && { at }),
    ...(path && { path }),
  })
  if (path) {
    const file = answer as FileContent
    write(
      file.encoding === 'utf8' ? file.content : `(binary file, ${Buffer.from(file.content, 'base64').length} bytes)\n`,
    )
    return 0
  }
  const listed = answer as FilesView
  if (!listed.tree) {
    out(`(no workspace snapshot at or before seq ${listed.seq})`)
    return 0
  }
  out(
    `# workspace of ${id} at seq ${listed.seq} (snapshot of seq ${listed.snapshotSeq}, tree ${listed.tree.slice(0, 12)})`,
  )
  for (const f of listed.files)
    out(`${String(f.size).padStart(10)}  ${f.path}${f.type === 'file' ? '' : `  (${f.type})`}`)
  return 0
}

/** `diff <session> --from <seq> --to <seq>`: the unified diff of the workspace between two seqs. */
export async function diffCommand(args: Args, { line: out, write, paint }: Terminal): Promise<number> {
  const id = args.positionals[0]
  if (!id) throw new UsageError('diff needs a session id')
  const from = intFlag(args, 'from')
  const to = intFlag(args, 'to')
  if (from === undefined || to === undefined) throw new UsageError('diff needs --from <seq> and --to <seq>')
  const diff = await httpClient().call('session.diff', { session: id, from, to })
  if (diff.files.length === 0) {
    out(`(no changes between seq ${from} and seq ${to})`)
    return 0
  }
  const patch = paintDiff(diff.patch, paint)
  write(patch.endsWith('\n') ? patch : `${patch}\n`)
  return 0
}

/** `revert <session> --to <seq> [--force]`: the directory as it was at the seq; later messages hidden from the model. */
export async function revertCommand(args: Args, { line: out }: Terminal): Promise<number> {
  const id = args.positionals[0]
  if (!id) throw new UsageError('revert needs a session id')
  const to = intFlag(args, 'to')
  if (to === undefined) throw new UsageError('revert needs --to <seq>')
  const force = args.flags.get('force') === true
  const answer = await httpClient().call('session.revert', { session: id, to, ...(force && { force: true }) })
  out(`reverted ${id} to seq ${to}: ${describe(answer)}, ${answer.messages.length} message(s) hidden from the model`)
  out('(chronicle unrevert brings them back, until the next input makes the revert final)')
  return 0
}

/** `unrevert <session> [--force]`: undoes the latest revert. */
export async function unrevertCommand(args: Args, { line: out }: Terminal): Promise<number> {
  const id = args.positionals[0]
  if (!id) throw new UsageError('unrevert needs a session id')
  const force = args.flags.get('force') === true
  const answer = await httpClient().call('session.unrevert', { session: id, ...(force && { force: true }) })
  out(`unreverted ${id}: ${describe(answer)}, ${answer.messages.length} message(s) shown again`)
  return 0
}

function describe(answer: RestoreAnswer): string {
  if (answer.changed.length === 0) return 'no file changed'
  const sign = { added: '+', deleted: '-', modified: '~' } as Record<string, string>
  return `${answer.changed.length} file(s) changed (${answer.changed.map((c) => `${sign[c.status] ?? '~'}${c.path}`).join(' ')})`
}
