import { basename, isAbsolute, relative } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { Root } from '@modelcontextprotocol/sdk/types.js'
import type { StorePorts } from '../../projections/store-ports.js'

/**
 * The MCP roots Chronicle offers (docs/TOOLS.md "Roots"): the directories
 * its sessions work in — the server's own directory, and each session's
 * where it differs (a fork with files works in a directory of its own).
 * MCP servers are shared by every session, so they are told the whole set;
 * when it changes (a session created, forked or archived; a fork's files
 * written) `onChange` hears it, and the manager sends `notifications/roots/list_changed`.
 */
export interface SessionRoots {
  list(): readonly Root[]
  onChange(listener: () => void): void
  close(): void
}

/**
 * A fork's directory is listed from `session.forked` on, but exists only once its files are written:
 * a server that checks its roots (server-filesystem drops a missing one) is told again then.
 */
const WRITTEN = 'workspace.materialized'

/**
 * `within`: the only places offered besides `directory` itself (the server's workspace, Chronicle's
 * forks directory). An operator may create a session in any directory, `/` even: shared servers are
 * never told of one outside these, so one session's choice cannot widen what every session's model
 * reaches through a server that follows its roots (server-filesystem does).
 */
export async function createSessionRoots(
  ports: Pick<StorePorts, 'log' | 'readModels'>,
  directory: string,
  within: readonly string[] = [directory],
): Promise<SessionRoots> {
  const inside = (dir: string) =>
    within.some((base) => {
      const rel = relative(base, dir)
      return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel))
    })
  const query = async () => new Set([directory, ...(await ports.readModels.liveSessionDirectories()).filter(inside)])
  const toRoots = (dirs: ReadonlySet<string>): Root[] =>
    [...dirs].sort().map((dir) => ({ uri: pathToFileURL(dir).href, name: basename(dir) || dir }))
  let dirs = await query()
  let roots = toRoots(dirs)
  const listeners: (() => void)[] = []
  const tell = () => {
    for (const listener of listeners) listener()
  }
  // the set read again one query at a time, in commit order: a later commit's answer is never overwritten
  let reading = Promise.resolve()
  const readAgain = (written: boolean) => {
    reading = reading
      .then(async () => {
        const next = await query()
        const changed = next.size !== dirs.size || [...next].some((d) => !dirs.has(d))
        dirs = next
        roots = toRoots(dirs)
        if (changed || written) tell()
      })
      .catch(() => {}) // a store closing under the server: the roots stay as they were
  }
  const unsubscribe = ports.log.onCommit((events) => {
    let changed = false
    let written = false
    for (const e of events) {
      // A new session's directory is in its event: creating sessions in a known directory costs no query.
      if (e.type === 'session.created' || e.type === 'session.forked') {
        const dir = e.data.directory
        if (dir !== undefined && !dirs.has(dir) && inside(dir)) changed = true
      } else if (e.type === 'session.archived')
        changed = true // its directory may be nobody's now
      else if (e.type === WRITTEN) written = true
    }
    if (changed) readAgain(written)
    else if (written) tell()
  })
  return {
    list: () => roots,
    onChange: (listener) => {
      listeners.push(listener)
    },
    close: unsubscribe,
  }
}
