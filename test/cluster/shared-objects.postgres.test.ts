import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { afterEach, describe, expect, it } from 'vitest'
import { isChronicleError } from '../../src/events/errors.js'
import { PG_TYPES, PostgresEventLog } from '../../src/events/postgres/log.js'
import { postgresWorkspaceObjects } from '../../src/events/postgres/workspace-objects.js'
import { createShadowStore, type ShadowStore } from '../../src/runtime/workspace/shadow-store.js'
import { shareSnapshots } from '../../src/runtime/workspace/shared-objects.js'
import { usePostgres } from '../support/use-postgres.js'

/**
 * Workspaces that move (docs/CLUSTER.md): two nodes, each with a shadow store of its own, share one
 * PostgreSQL. What one records, the other reads, diffs, writes into a new directory and restores a directory
 * to — fetched from the shared store the first time it needs it.
 */
const server = usePostgres()

describe('workspace snapshots shared between nodes', () => {
  const cleanup: (() => Promise<void> | void)[] = []
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step()
  })

  const setup = async () => {
    const url = await server().database()
    const log = await PostgresEventLog.open(url) // the migrations
    const db = new pg.Pool({ connectionString: url, max: 2, types: PG_TYPES })
    const root = mkdtempSync(join(tmpdir(), 'chronicle-shared-objects-'))
    cleanup.push(
      () => rmSync(root, { recursive: true, force: true }),
      () => db.end(),
      () => log.close(),
    )
    const node = (name: string): ShadowStore => {
      const storeRoot = join(root, name)
      const local = createShadowStore({ root: storeRoot, globalExcludes: null, watch: false })
      const shadow = shareSnapshots(local, postgresWorkspaceObjects(db), join(storeRoot, 'objects.git'))
      cleanup.push(() => shadow.close())
      return shadow
    }
    const stored = async () => Number((await db.query('SELECT count(*) AS n FROM workspace_objects')).rows[0].n)
    return { root, db, node, stored }
  }

  it('lets another node read, diff, write and restore what one node recorded', async () => {
    const { root, node, stored } = await setup()
    const work = join(root, 'work')
    mkdirSync(join(work, 'src', 'deep'), { recursive: true })
    writeFileSync(join(work, 'README.md'), '# hello\n')
    writeFileSync(join(work, 'src', 'main.ts'), 'export const x = 1\n')
    writeFileSync(join(work, 'src', 'deep', 'data.bin'), Buffer.from([0, 1, 2, 255, 0, 7]))
    symlinkSync('README.md', join(work, 'link'))
    const a = node('node-a')
    const b = node('node-b')

    const first = await a.snapshot(work)
    expect(await stored()).toBe(7) // 3 trees (root, src, src/deep) and 4 blobs (a symlink's is its target)
    writeFileSync(join(work, 'src', 'main.ts'), 'export const x = 2\n')
    const second = await a.snapshot(work)
    // only what changed: the new blob, and the trees above it
    expect(await stored()).toBe(10)

    expect((await b.list(second.tree)).map((e) => e.path).sort()).toEqual([
      'README.md',
      'link',
      'src/deep/data.bin',
      'src/main.ts',
    ])
    expect((await b.read(second.tree, 'src/deep/data.bin')).content).toEqual(Buffer.from([0, 1, 2, 255, 0, 7]))
    expect((await b.diff(first.tree, second.tree)).files).toEqual([
      expect.objectContaining({ path: 'src/main.ts', status: 'modified' }),
    ])
    const copy = join(root, 'copy')
    await b.materialize(first.tree, copy)
    expect(readFileSync(join(copy, 'src', 'main.ts'), 'utf8')).toBe('export const x = 1\n')

    // node-b restores the directory to the first tree: the files as node-a recorded them
    writeFileSync(join(work, 'half-written.txt'), 'cut off')
    await b.restore(work, first.tree)
    expect(readFileSync(join(work, 'src', 'main.ts'), 'utf8')).toBe('export const x = 1\n')
    // and what node-b recorded on the way (the directory before the restore) node-a can read
    const after = await b.snapshot(work)
    expect((await a.list(after.tree)).map((e) => e.path)).toContain('src/main.ts')
  })

  it('says the store is damaged when the shared store lacks an object of a tree', async () => {
    const { root, db, node } = await setup()
    const work = join(root, 'work')
    mkdirSync(work)
    writeFileSync(join(work, 'a.txt'), 'a\n')
    const { tree } = await node('node-a').snapshot(work)
    await db.query('DELETE FROM workspace_objects WHERE id <> $1', [tree])
    const err = await node('node-b')
      .list(tree)
      .catch((e: unknown) => e)
    expect(isChronicleError(err, 'WORKSPACE_DAMAGED')).toBe(true)
  })
})
