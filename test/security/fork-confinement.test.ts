import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { checkNotInDataDir } from '../../src/commands/directory.js'
import { isForbidden } from '../../src/tools/paths.js'
import { bwrapSandbox } from '../../src/tools/sandbox.js'

/**
 * A fork's own directory lies in the data dir (`<dataDir>/forks/<id>`), which
 * every tool must treat as closed (docs/SECURITY.md). The session reaches its
 * own directory there and nothing else: not through the path checks, not
 * from a shell in the real bubblewrap sandbox. No other session directory
 * may be placed in the data dir.
 */

let root: string
let dataDir: string
let fork: string

beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'chronicle-fork-confinement-')))
  dataDir = join(root, 'data')
  fork = join(dataDir, 'forks', 'ses_child')
  mkdirSync(fork, { recursive: true })
  writeFileSync(join(dataDir, 'token'), 'server-token-secret\n')
  writeFileSync(join(fork, 'work.txt'), 'the fork works here\n')
})

afterEach(() => rmSync(root, { recursive: true, force: true }))

describe("a fork's directory inside the data dir", () => {
  it('path checks: its own files are open to it; the rest of the data dir stays closed, to it and to others', () => {
    expect(isForbidden(join(fork, 'work.txt'), [dataDir], fork)).toBe(false)
    expect(isForbidden(join(dataDir, 'token'), [dataDir], fork)).toBe(true)
    expect(isForbidden(join(dataDir, 'forks', 'ses_other', 'x'), [dataDir], fork)).toBe(true)
    expect(isForbidden(join(fork, 'work.txt'), [dataDir], join(root, 'elsewhere'))).toBe(true)
    // a session working in the data dir itself gains nothing
    expect(isForbidden(join(dataDir, 'token'), [dataDir], dataDir)).toBe(true)
  })

  it('the sandbox: a shell in the fork writes its own files and cannot see the token', async () => {
    const sandbox = bwrapSandbox({ hidden: [dataDir] })
    const { file, args } = sandbox.wrap(
      ['/bin/sh', '-c', `cat ${join(dataDir, 'token')} 2>&1; ls ${dataDir}; echo written > made.txt; cat work.txt`],
      { workspace: fork, cwd: fork },
    )
    const out = await new Promise<string>((resolve, reject) =>
      execFile(file, args, (err, stdout, stderr) => (err && !stdout ? reject(new Error(stderr)) : resolve(stdout))),
    )
    expect(out).not.toContain('server-token-secret')
    expect(out).toContain('the fork works here')
    expect(readFileSync(join(fork, 'made.txt'), 'utf8')).toBe('written\n')
  })

  it('no other session directory may lie in the data dir: DIRECTORY_FORBIDDEN', () => {
    expect(() => checkNotInDataDir(fork, dataDir)).not.toThrow()
    expect(() => checkNotInDataDir(join(root, 'project'), dataDir)).not.toThrow()
    for (const inside of [dataDir, join(dataDir, 'workspaces'), join(dataDir, 'forks')])
      expect(() => checkNotInDataDir(inside, dataDir)).toThrow(expect.objectContaining({ code: 'DIRECTORY_FORBIDDEN' }))
  })
})
