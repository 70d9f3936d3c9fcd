import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { createApplyPatchTool } from '../../src/tools/builtin/apply-patch.js'
import { createMultiEditTool } from '../../src/tools/builtin/multiedit.js'
import { createReadTool } from '../../src/tools/builtin/read.js'
import { credentialPaths } from '../../src/tools/credentials/credential-paths.js'
import { createFileTimes } from '../../src/tools/file-times.js'
import type { Tool } from '../../src/tools/tool.js'
import { snapshot } from '../tools/dir-snapshot.js'
import { type Fixture, fixture, tempDir } from '../tools/helpers.js'

/**
 * A hostile patch (docs/SECURITY.md, "apply_patch and multiedit"): every path it touches — a
 * move's destination too — is confined like edit's. Each attack is refused with its code and
 * nothing anywhere under the test's root changes; the default `build` agent's rules are used and
 * every request a person would see is rejected.
 */

const patch = (...lines: string[]) => ['*** Begin Patch', ...lines, '*** End Patch'].join('\n')

interface Attack {
  readonly name: string
  readonly tool: 'apply_patch' | 'multiedit'
  readonly args: (root: string) => Record<string, unknown>
  readonly code: string
  /** the permissions asked (and rejected) on the way, in order */
  readonly asked: readonly string[]
}

const ATTACKS: Attack[] = [
  {
    name: 'adds ../outside/x',
    tool: 'apply_patch',
    args: () => ({ patchText: patch('*** Add File: ok.txt', '+fine', '*** Add File: ../outside/x', '+pwned') }),
    code: 'PATH_OUTSIDE_WORKSPACE',
    asked: [],
  },
  {
    name: 'adds an absolute path outside',
    tool: 'apply_patch',
    args: (root) => ({ patchText: patch(`*** Add File: ${join(root, 'outside', 'x')}`, '+pwned') }),
    code: 'PATH_OUTSIDE_WORKSPACE',
    asked: [],
  },
  {
    name: 'moves a file to ../outside',
    tool: 'apply_patch',
    args: () => ({ patchText: patch('*** Update File: a.txt', '*** Move to: ../outside/a.txt') }),
    code: 'PATH_OUTSIDE_WORKSPACE',
    asked: [],
  },
  {
    name: 'adds through a symlink pointing out',
    tool: 'apply_patch',
    args: () => ({ patchText: patch('*** Add File: out/x', '+pwned') }),
    code: 'PATH_OUTSIDE_WORKSPACE',
    asked: [],
  },
  {
    name: 'adds through a dangling symlink pointing out',
    tool: 'apply_patch',
    args: () => ({ patchText: patch('*** Add File: dangling', '+pwned') }),
    code: 'PATH_OUTSIDE_WORKSPACE',
    asked: [],
  },
  {
    name: 'updates through a symlink pointing out',
    tool: 'apply_patch',
    args: () => ({ patchText: patch('*** Update File: out/target.txt', '-outside', '+pwned') }),
    code: 'PATH_OUTSIDE_WORKSPACE',
    asked: [],
  },
  {
    name: 'adds a file into the data dir (inside the workspace)',
    tool: 'apply_patch',
    args: () => ({ patchText: patch('*** Add File: .data/token.new', '+pwned') }),
    code: 'PATH_FORBIDDEN',
    asked: [],
  },
  {
    name: 'moves a file into the data dir',
    tool: 'apply_patch',
    args: () => ({ patchText: patch('*** Update File: a.txt', '*** Move to: .data/a.txt') }),
    code: 'PATH_FORBIDDEN',
    asked: [],
  },
  {
    name: 'deletes the data dir token',
    tool: 'apply_patch',
    args: () => ({ patchText: patch('*** Delete File: .data/token') }),
    code: 'PATH_FORBIDDEN',
    asked: [],
  },
  {
    name: 'adds a key to a hidden credential path through a workspace symlink',
    tool: 'apply_patch',
    args: () => ({ patchText: patch('*** Add File: keys/authorized_keys', '+ssh-ed25519 AAAA attacker') }),
    code: 'PERMISSION_DENIED',
    asked: ['credentials'],
  },
  {
    name: 'moves a file onto a hidden credential path',
    tool: 'apply_patch',
    args: (root) => ({ patchText: patch('*** Update File: a.txt', `*** Move to: ${join(root, 'home', '.ssh', 'a')}`) }),
    code: 'PERMISSION_DENIED',
    asked: ['credentials'],
  },
  {
    name: 'multiedit: edits the data dir token',
    tool: 'multiedit',
    args: () => ({ filePath: '.data/token', edits: [{ oldString: 'secret', newString: 'pwned' }] }),
    code: 'PATH_FORBIDDEN',
    asked: [],
  },
  {
    name: 'multiedit: creates a key under a hidden credential path',
    tool: 'multiedit',
    args: () => ({ filePath: 'keys/authorized_keys', edits: [{ oldString: '', newString: 'attacker' }] }),
    code: 'PERMISSION_DENIED',
    asked: ['credentials'],
  },
  {
    name: 'multiedit: edits through a symlink pointing out (asks external_directory, as edit does)',
    tool: 'multiedit',
    args: () => ({ filePath: 'out/target.txt', edits: [{ oldString: 'outside', newString: 'pwned' }] }),
    code: 'PERMISSION_DENIED',
    asked: ['external_directory'],
  },
]

describe('apply_patch and multiedit refuse a hostile path, writing nothing', () => {
  let tmp: ReturnType<typeof tempDir>
  let f: Fixture
  let tools: Record<Attack['tool'], Tool>
  let read: ReturnType<typeof createReadTool>
  beforeEach(() => {
    tmp = tempDir('chronicle-patch-')
    const work = join(tmp.dir, 'work')
    const data = join(work, '.data')
    mkdirSync(data, { recursive: true })
    mkdirSync(join(tmp.dir, 'outside'))
    mkdirSync(join(tmp.dir, 'home', '.ssh'), { recursive: true })
    writeFileSync(join(work, 'a.txt'), 'one\n')
    writeFileSync(join(data, 'token'), 'secret\n')
    writeFileSync(join(tmp.dir, 'outside', 'target.txt'), 'outside\n')
    writeFileSync(join(tmp.dir, 'home', '.ssh', 'id_ed25519'), 'PRIVATE KEY\n')
    symlinkSync(join(tmp.dir, 'outside'), join(work, 'out'))
    symlinkSync(join(tmp.dir, 'outside', 'new.txt'), join(work, 'dangling'))
    symlinkSync(join(tmp.dir, 'home', '.ssh'), join(work, 'keys'))
    f = fixture({ directory: work }) // build: edit, credentials and external_directory ask
    const fileTimes = createFileTimes()
    const deps = {
      fileTimes,
      forbidden: [data],
      credentials: credentialPaths({ hide: [join(tmp.dir, 'home', '.ssh')] }),
    }
    read = createReadTool({ dataDir: data, fileTimes })
    tools = { apply_patch: createApplyPatchTool(deps), multiedit: createMultiEditTool(deps) }
  })
  afterEach(() => {
    f.gate.close()
    f.store.close()
    tmp.cleanup()
  })

  /** Runs a call, rejecting every request a person is asked, until it settles. */
  async function rejecting(run: Promise<unknown>): Promise<unknown> {
    let settled = false
    const outcome = run.then(
      () => undefined,
      (err: unknown) => err,
    )
    void outcome.finally(() => {
      settled = true
    })
    let answered = 0
    while (!settled) {
      const pending = f.requested()
      for (; answered < pending.length; answered++) {
        f.store.append(
          f.sessionId,
          [
            {
              type: 'permission.replied',
              data: { requestId: pending[answered]?.requestId as string, reply: 'reject' },
            },
          ],
          { meta: { actor: 'user' } },
        )
      }
      await new Promise((r) => setTimeout(r, 5))
    }
    return outcome
  }

  it.each(ATTACKS)('$tool $name', async (attack) => {
    await read.execute({ filePath: 'a.txt' }, f.ctx())
    const before = snapshot(tmp.dir)
    const err = await rejecting(tools[attack.tool].execute(attack.args(tmp.dir), f.ctx()))
    expect(err).toMatchObject({ code: attack.code })
    expect((err as Error).message.startsWith(`${attack.code}: `)).toBe(true)
    expect(f.requested().map((r) => r.permission)).toEqual(attack.asked)
    expect(snapshot(tmp.dir)).toEqual(before)
  })
})
