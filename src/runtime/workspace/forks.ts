import { readdir, realpath, rm } from 'node:fs/promises'
import { basename, dirname, isAbsolute, join, resolve } from 'node:path'
import type { EventMeta } from '../../events/envelope.js'
import { ChronicleError } from '../../events/errors.js'
import type { IdSource } from '../../events/ids.js'
import type { StorePorts } from '../../projections/store-ports.js'
import { appendFork, decideFork, type ForkOptions, fork as forkHistory, readForkPoint } from '../../commands/fork.js'
import { decideMaterializeEnd, taskError } from '../../commands/workspace-tasks.js'
import { execute } from '../../commands/execute.js'
import type { Session } from '../../projections/fold/model.js'
import type { GitHead } from '../../events/catalogue.js'
import type { CredentialPaths } from '../../tools/credentials/credential-paths.js'
import { isWithin } from '../../tools/paths.js'
import { makeForkRepository } from './fork-repository.js'
import { firstSnapshot, requireSession } from './recorded.js'
import { findRepository, sameHead } from './repository.js'
import { requireEmpty } from './materialize.js'
import type { ShadowStore } from './shadow-store.js'

/**
 * Fork with files (docs/TIME-TRAVEL.md "Fork"): the child gets its own
 * directory, written from the workspace recorded at the fork point, so its
 * model reads the files as they were there while the parent's directory is
 * untouched. By default the directory is `<dataDir>/forks/<child id>`; a
 * client may name one that does not exist or is empty.
 *
 * Writing it is a recorded task in the child's log:
 * `workspace.materialize.started` (appended with `session.forked`) →
 * `workspace.materialized` or `.failed`. The files are checked out beside
 * the target and renamed into place, so after a crash the target is either
 * absent or whole; `recover` finishes what was started.
 *
 * The history alone is forked (the child shares the parent's directory, or
 * works in the one named) when `files` is false, when the parent has no
 * recorded workspace (snapshots off, no step run), or for imported history,
 * whose trees this server never recorded.
 */

export interface ForkWithFilesOptions extends ForkOptions {
  /** false: fork the history only */
  readonly files?: boolean
}

export interface WorkspaceForks {
  fork(sessionId: string, at: number, options?: ForkWithFilesOptions): Promise<Session>
  /** finishes every fork directory a crash left half-written; returns how many */
  /** `among`: only these sessions (a cluster node's claimed ones: docs/CLUSTER.md) */
  recover(among?: ReadonlySet<string>): Promise<number>
}

export interface WorkspaceForksDeps {
  /** what a fork reads its point through and appends through */
  readonly ports: StorePorts
  readonly ids: IdSource
  readonly shadow: ShadowStore
  /** where a fork's directory goes when the client names none: `<dataDir>/forks` */
  readonly forksDir: string
  /**
   * where a fork's repository may not borrow objects from: what the sandbox
   * hides — Chronicle's own files (forks' directories excepted: a fork of a
   * fork borrows from its parent's) and the user's credentials
   */
  readonly forbidden?: readonly string[]
  readonly credentials?: CredentialPaths
  readonly log?: { warn(obj: object, msg?: string): void }
}

/** A fork's repository to make: HEAD as recorded, and the directory whose repository holds its objects. */
interface ForkGit {
  readonly head: GitHead
  readonly source: string
}

export function createWorkspaceForks(deps: WorkspaceForksDeps): WorkspaceForks {
  const { ports, shadow } = deps

  /** Records the end of the child's materialization (once: see src/commands/workspace-tasks.ts). */
  const end = (childId: string, result: Parameters<typeof decideMaterializeEnd>[1], meta: EventMeta) =>
    execute(ports, childId, (child) => decideMaterializeEnd(child, result), { meta, durability: 'full' })

  let places: Promise<{ forbidden: string[]; forks: string }> | undefined
  /** what the child's sandbox hides, and which hidden objects are a parent fork's own (copied), as tests of real paths */
  async function sandboxOf(directory: string, source: string) {
    places ??= Promise.all([Promise.all((deps.forbidden ?? []).map(real)), real(deps.forksDir)]).then(
      ([forbidden, forks]) => ({ forbidden, forks }),
    )
    const { forbidden, forks } = await places
    const credentials = deps.credentials?.view(directory)
    const parentFork = await real(source)
    return {
      hidden: (path: string) =>
        forbidden.some((f) => isWithin(f, path)) || isWithin(forks, path) || credentials?.hiding(path) !== undefined,
      // only the parent's own .git, and only when the parent is a fork's directory: never another fork's
      copied: (path: string) => isWithin(forks, parentFork) && path === join(parentFork, '.git', 'objects'),
    }
  }

  /** Makes the checkout a repository at the recorded HEAD; false (and logged) when it cannot be one. */
  async function asRepository(
    checkout: string,
    directory: string,
    childId: string,
    { head, source }: ForkGit,
  ): Promise<boolean> {
    try {
      const why = await makeForkRepository(checkout, { source, head, ...(await sandboxOf(directory, source)) })
      if (why === undefined) return true
      deps.log?.warn({ sessionId: childId, source }, `the fork's directory is not a repository: ${why}`)
    } catch (err) {
      deps.log?.warn({ err, sessionId: childId, source }, "the fork's directory could not be made a repository")
    }
    return false
  }

  async function materialize(
    childId: string,
    tree: string,
    directory: string,
    meta: EventMeta,
    git?: ForkGit,
  ): Promise<void> {
    let written: { files: number; bytes: number }
    let made = false as boolean
    try {
      written = await shadow.materialize(
        tree,
        directory,
        git &&
          (async (checkout) => {
            made = await asRepository(checkout, directory, childId, git)
          }),
      )
    } catch (err) {
      await end(childId, { ok: false, error: taskError(err) }, meta)
      throw err
    }
    const { files, bytes } = written
    await end(childId, { ok: true, written: { tree, files, bytes, ...(made && git && { git: git.head }) } }, meta)
  }

  /** The directory a child's fork point recorded its workspace in: its parent's there. */
  async function sourceOf(child: Session): Promise<string | undefined> {
    if (!child.forkedFrom) return undefined
    const view = await ports.timeTravel.viewAt(child.forkedFrom.sessionId, child.forkedFrom.seq).catch(() => undefined)
    return view?.session?.directory
  }

  return {
    async fork(sessionId, at, options = {}) {
      const { files, directory, title, meta } = options
      const { parent, fromImport } = await readForkPoint(ports, sessionId, at)
      const workspace = parent.session?.workspace ?? (await firstSnapshot(ports.log, sessionId))
      const tree = workspace?.tree
      if (files === false || fromImport || !tree) {
        const history = {
          ...(title !== undefined && { title }),
          ...(directory !== undefined && { directory }),
        }
        return forkHistory(ports, deps.ids, sessionId, at, { ...history, ...(meta && { meta }) })
      }

      if (directory !== undefined && !isAbsolute(directory))
        throw new ChronicleError('BAD_REQUEST', `directory must be an absolute path: ${directory}`)
      // the parent's repository HEAD there, when its directory is a repository's top level
      const head = workspace?.git
      const source = parent.session?.directory
      const childId = deps.ids.next('ses')
      const target = resolve(directory ?? join(deps.forksDir, childId))
      await requireEmpty(target)
      const by = meta ?? { actor: 'user', command: 'fork' }
      await appendFork(
        ports,
        childId,
        [
          ...decideFork(parent, { sessionId, seq: at }, { ...(title !== undefined && { title }), directory: target }),
          { type: 'workspace.materialize.started', data: { tree, directory: target, ...(head && { git: head }) } },
        ],
        by,
      )
      await materialize(childId, tree, target, by, head && source ? { head, source } : undefined)
      return requireSession(ports.readModels, childId)
    },

    async recover(among) {
      let finished = 0
      for (const id of await ports.readModels.sessionsWithWorkspaceTask()) {
        if (among && !among.has(id)) continue
        const session = await requireSession(ports.readModels, id)
        if (!session.materializing) continue
        const { tree, directory, git: head } = session.materializing
        // a crash leaves the checkout beside the target, never a half-written target
        await removePartials(directory)
        const whole = await shadow.snapshot(directory).then(
          (found) => found.tree === tree,
          () => false,
        )
        if (whole) {
          // renamed into place, and then the crash: only the event is missing
          const entries = (await shadow.list(tree)).filter((e) => e.type !== 'gitlink')
          const bytes = entries.reduce((sum, e) => sum + e.size, 0)
          // the repository is made before the rename: it is there, as made, or the directory is plain
          const made = head && sameHead((await findRepository(directory))?.head, head)
          const written = { tree, files: entries.length, bytes, ...(made && { git: head }) }
          await end(id, { ok: true, written }, { actor: 'recovery' })
          finished++
          continue
        }
        const source = head && (await sourceOf(session))
        const git = head && source ? { head, source } : undefined
        await materialize(id, tree, directory, { actor: 'recovery' }, git).catch((err: unknown) => {
          deps.log?.warn({ err, sessionId: id, directory }, "a fork's directory could not be written")
        })
        finished++
      }
      return finished
    },
  }
}

async function removePartials(directory: string): Promise<void> {
  const parent = dirname(directory)
  const prefix = `${basename(directory)}.partial-`
  const entries = await readdir(parent).catch(() => [] as string[])
  await Promise.all(
    entries
      .filter((name) => name.startsWith(prefix))
      .map((name) => rm(join(parent, name), { recursive: true, force: true })),
  )
}

/** A path's real path, or itself when it does not exist (yet). */
function real(path: string): Promise<string> {
  return realpath(path).catch(() => resolve(path))
}
