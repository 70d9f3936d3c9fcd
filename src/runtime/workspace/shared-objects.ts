import { randomBytes } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { deflateSync, inflateSync } from 'node:zlib'
import { ChronicleError } from '../../events/errors.js'
import type { WorkspaceObject, WorkspaceObjects } from '../../events/workspace-objects.js'
import { type GitPlace, git } from './git.js'
import { EMPTY_TREE, type ShadowStore } from './shadow-store.js'

/**
 * A node's shadow store with its snapshots shared (docs/CLUSTER.md "Workspaces that move"): every object of a
 * recorded tree is put in the cluster's store before the snapshot returns — so before its event is appended —
 * and a tree this node never recorded is fetched from there before anything reads it. A node that takes a
 * session over can so write the session's directory from its last recorded tree, and serve its files, diffs,
 * forks and reverts, whichever node recorded them.
 *
 * Objects go as git keeps them loose (the store never packs: its gc is off), so neither way starts a git
 * process per object. What a snapshot adds is found by `git rev-list --objects <tree> --not <previous>` when
 * the previous tree is known to be shared; otherwise every object of the tree is offered and the store says
 * which it lacks. A fetched tree is written leaves first, so a tree present locally always has its objects.
 */

/** Trees this process knows are shared, remembered up to this many (a shortcut: forgetting one costs a query). */
const REMEMBERED_TREES = 4_096
/** A large first snapshot goes in statements of at most so many objects, or so many bytes. */
const BATCH_OBJECTS = 1_000
const BATCH_BYTES = 16 * 2 ** 20
/** A gitlink (a nested repository's commit) is recorded, never stored: nothing to fetch. */
const GITLINK = '160000'

export function shareSnapshots(local: ShadowStore, objects: WorkspaceObjects, gitDir: string): ShadowStore {
  const place: GitPlace = { gitDir, home: join(gitDir, '..') }
  const shared = new Set<string>()
  const loose = (id: string) => join(gitDir, 'objects', id.slice(0, 2), id.slice(2))
  const remember = (tree: string) => {
    if (shared.size >= REMEMBERED_TREES) shared.delete(shared.values().next().value as string)
    shared.add(tree)
  }

  async function bodyOf(id: string): Promise<Buffer> {
    try {
      return await readFile(loose(id))
    } catch {
      // not loose (a backup put back may hold packs): as git would write it
      const type = (await git(['cat-file', '-t', id], place)).toString().trim()
      const content = await git(['cat-file', type, id], place)
      return deflateSync(Buffer.concat([Buffer.from(`${type} ${content.length}\0`), content]))
    }
  }

  async function share(tree: string, previous: string): Promise<void> {
    if (tree === EMPTY_TREE || shared.has(tree)) return
    const since = previous !== EMPTY_TREE && shared.has(previous) ? ['--not', previous] : []
    const listed = await git(['rev-list', '--objects', '--no-object-names', tree, ...since], place)
    const ids = listed
      .toString()
      .split('\n')
      .filter((id) => id.length === 40)
    let batch: WorkspaceObject[] = []
    let bytes = 0
    for (let at = 0; at < ids.length; at += BATCH_OBJECTS)
      for (const id of await objects.missing(ids.slice(at, at + BATCH_OBJECTS))) {
        const body = await bodyOf(id)
        batch.push({ id, body })
        bytes += body.length
        if (batch.length < BATCH_OBJECTS && bytes < BATCH_BYTES) continue
        await objects.put(batch)
        batch = []
        bytes = 0
      }
    await objects.put(batch)
    remember(tree)
  }

  async function fetch(tree: string): Promise<void> {
    if (tree === EMPTY_TREE || existsSync(loose(tree))) return
    const fetched: WorkspaceObject[] = []
    for (let wanted = [tree]; wanted.length > 0; ) {
      const got = await objects.get(wanted)
      if (got.length < wanted.length) {
        const have = new Set(got.map((o) => o.id))
        throw new ChronicleError(
          'WORKSPACE_DAMAGED',
          `the shared store lacks objects of workspace tree ${tree}: ${wanted.filter((id) => !have.has(id)).join(', ')}`,
          { tree },
        )
      }
      fetched.push(...got)
      const next = new Set<string>()
      for (const o of got) for (const id of childrenOf(o.body)) if (!existsSync(loose(id))) next.add(id)
      wanted = [...next]
    }
    // leaves first: a tree that is here has everything under it here, whenever this is cut off
    for (const o of fetched.reverse()) await writeLoose(loose(o.id), o.body)
    remember(tree)
  }

  return {
    async snapshot(directory, options) {
      const snapshot = await local.snapshot(directory, options)
      await share(snapshot.tree, snapshot.previous)
      return snapshot
    },
    async list(tree) {
      await fetch(tree)
      return local.list(tree)
    },
    async read(tree, path) {
      await fetch(tree)
      return local.read(tree, path)
    },
    async diff(from, to) {
      await fetch(from)
      await fetch(to)
      return local.diff(from, to)
    },
    async restore(directory, tree) {
      await fetch(tree)
      const restored = await local.restore(directory, tree)
      await share(restored.before.tree, restored.before.previous)
      return restored
    },
    async materialize(tree, target, prepare) {
      await fetch(tree)
      return local.materialize(tree, target, prepare)
    },
    bytesOnDisk: () => local.bytesOnDisk(),
    close: () => local.close(),
  }
}

/** The ids a loose object names: a tree's entries (gitlinks aside); nothing for a blob. */
function childrenOf(body: Buffer): string[] {
  const raw = inflateSync(body)
  const header = raw.indexOf(0)
  if (!raw.subarray(0, header).toString().startsWith('tree ')) return []
  const ids: string[] = []
  for (let at = header + 1; at < raw.length; ) {
    const space = raw.indexOf(0x20, at)
    const nul = raw.indexOf(0, space)
    const mode = raw.subarray(at, space).toString()
    if (mode !== GITLINK) ids.push(raw.subarray(nul + 1, nul + 21).toString('hex'))
    at = nul + 21
  }
  return ids
}

/** Written whole or not at all: a reader never sees half an object. */
async function writeLoose(path: string, body: Buffer): Promise<void> {
  if (existsSync(path)) return
  await mkdir(join(path, '..'), { recursive: true })
  const temporary = `${path}.${randomBytes(6).toString('hex')}.tmp`
  await writeFile(temporary, body)
  await rename(temporary, path)
}
