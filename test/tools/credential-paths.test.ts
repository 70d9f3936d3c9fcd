import { execFileSync } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { credentialPaths } from '../../src/tools/credentials/credential-paths.js'
import { bwrapSandbox } from '../../src/tools/sandbox.js'
import { emptyFileIn, layerMounts } from '../../src/tools/sandbox-mounts.js'

/**
 * Which paths the user's hidden credentials cover (src/tools/credentials/credential-paths.ts)
 * and how the sandbox layers them (src/tools/sandbox-mounts.ts): the most specific entry
 * decides, paths compare as real paths, a path about to be written is covered before it
 * exists, and a session directory is never hidden from itself.
 */

let root: string
let home: string
beforeEach(() => {
  // under /var/tmp: the sandbox mounts its own /tmp
  root = realpathSync(mkdtempSync('/var/tmp/chronicle-credential-paths-'))
  home = join(root, 'home')
  mkdirSync(join(home, '.ssh'), { recursive: true })
  mkdirSync(join(home, '.aws', 'prod'), { recursive: true })
  writeFileSync(join(home, '.ssh', 'id_ed25519'), 'KEY\n')
  writeFileSync(join(home, '.ssh', 'known_hosts'), 'HOSTS\n')
})
afterEach(() => rmSync(root, { recursive: true, force: true }))

describe('what a path is hidden by', () => {
  it('the most specific entry decides; at the same path a reveal wins', () => {
    const view = credentialPaths({
      hide: [join(home, '.ssh'), join(home, '.aws', 'prod'), join(home, '.netrc')],
      reveal: [join(home, '.ssh', 'known_hosts'), join(home, '.aws'), join(home, '.netrc')],
    }).view(join(root, 'work'))
    expect(view.hiding(join(home, '.ssh', 'id_ed25519'))).toBe(join(home, '.ssh'))
    expect(view.hiding(join(home, '.ssh', 'known_hosts'))).toBeUndefined()
    expect(view.hiding(join(home, '.aws', 'config'))).toBeUndefined()
    expect(view.hiding(join(home, '.aws', 'prod', 'credentials'))).toBe(join(home, '.aws', 'prod'))
    expect(view.hiding(join(home, '.netrc'))).toBeUndefined()
    expect(view.hiding(join(home, '.sshd', 'x'))).toBeUndefined() // a sibling sharing the prefix
  })

  it('a path that does not exist yet is covered, by a plain entry and by a glob', () => {
    const view = credentialPaths({ hide: [join(home, '.ssh'), join(home, '.cargo', 'credentials*')] }).view(root)
    expect(view.hiding(join(home, '.ssh', 'authorized_keys'))).toBe(join(home, '.ssh'))
    expect(view.hiding(join(home, '.cargo', 'credentials.toml'))).toBe(join(home, '.cargo', 'credentials.toml'))
    expect(view.hiding(join(home, '.cargo', 'config.toml'))).toBeUndefined()
  })

  it('through symlinks: a ~/.ssh that links elsewhere hides where it points', () => {
    const keys = join(root, 'mnt', 'keys')
    mkdirSync(keys, { recursive: true })
    writeFileSync(join(keys, 'id_rsa'), 'LINKED-KEY\n')
    rmSync(join(home, '.ssh'), { recursive: true })
    symlinkSync(keys, join(home, '.ssh'))
    const view = credentialPaths({ hide: [join(home, '.ssh')] }).view(root)
    expect(view.hiding(join(keys, 'id_rsa'))).toBe(keys)
    expect(view.mounts).toEqual([{ path: keys, action: 'hide' }])
  })

  it('odd homes: a file where ~/.config would be, a dangling ~/.ssh link (covered where a write would land)', () => {
    writeFileSync(join(home, '.config'), 'not a directory')
    rmSync(join(home, '.ssh'), { recursive: true })
    symlinkSync(join(root, 'gone', 'keys'), join(home, '.ssh'))
    const view = credentialPaths({ hide: [join(home, '.config', 'gh'), join(home, '.ssh')] }).view(root)
    expect(view.mounts).toEqual([])
    expect(view.hiding(join(root, 'gone', 'keys', 'id_ed25519'))).toBe(join(root, 'gone', 'keys'))
    expect(view.hiding(join(home, '.config'))).toBeUndefined()
  })

  it('a session directory inside a hidden path sees its own files; a hidden path inside it stays hidden', () => {
    const project = join(home, '.aws', 'project')
    const paths = credentialPaths({ hide: [join(home, '.aws'), join(project, 'secrets')] })
    const view = paths.view(project)
    expect(view.hiding(join(project, 'main.ts'))).toBeUndefined()
    expect(view.hiding(join(home, '.aws', 'credentials'))).toBe(join(home, '.aws'))
    expect(view.hiding(join(project, 'secrets', 'a'))).toBe(join(project, 'secrets'))
    // seen from elsewhere, the project is hidden like the rest
    expect(paths.view(root).hiding(join(project, 'main.ts'))).toBe(join(home, '.aws'))
  })
})

describe('the sandbox layers them shallowest first', () => {
  it("by depth: hides, then reveals inside them, then the session directory over a hidden path, then what hides inside it; never Chronicle's own", () => {
    const work = join(home, '.aws', 'work')
    const data = join(home, '.local', 'share', 'chronicle')
    mkdirSync(join(work, 'secrets'), { recursive: true })
    mkdirSync(data, { recursive: true })
    const args = layerMounts(
      work,
      [data],
      [
        { path: join(home, '.aws'), action: 'hide' },
        { path: join(work, 'secrets'), action: 'hide' },
        { path: join(home, '.ssh'), action: 'hide' },
        { path: join(home, '.ssh', 'known_hosts'), action: 'reveal' },
        { path: join(data, 'token'), action: 'reveal' },
        { path: join(home, '.aws', 'prod'), action: 'hide' }, // under a hidden path already
      ],
    )
    expect(args).toEqual([
      ...['--tmpfs', join(home, '.aws')],
      ...['--tmpfs', join(home, '.ssh')],
      ...['--ro-bind', join(home, '.ssh', 'known_hosts'), join(home, '.ssh', 'known_hosts')],
      ...['--bind', work, work],
      ...['--tmpfs', data],
      ...['--tmpfs', join(work, 'secrets')],
    ])
  })

  it('real bubblewrap: a symlinked ~/.ssh is hidden by either name, and an empty file stands for a hidden one', () => {
    const keys = join(root, 'mnt', 'keys')
    mkdirSync(keys, { recursive: true })
    writeFileSync(join(keys, 'id_rsa'), 'LINKED-KEY\n')
    writeFileSync(join(home, '.netrc'), 'machine x password NETRC-SECRET\n')
    rmSync(join(home, '.ssh'), { recursive: true })
    symlinkSync(keys, join(home, '.ssh'))
    const work = join(root, 'work')
    mkdirSync(work)
    const sandbox = bwrapSandbox({
      credentials: credentialPaths({ hide: [join(home, '.ssh'), join(home, '.netrc')] }),
    })
    const { file, args } = sandbox.wrap(
      ['/bin/sh', '-c', `cat ${home}/.ssh/id_rsa ${keys}/id_rsa; wc -c < ${home}/.netrc; echo end`],
      { workspace: work, cwd: work },
    )
    const out = execFileSync(file, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
    expect(out).toBe('0\nend\n')
  })
})

describe('the empty file that stands for a hidden one', () => {
  const shared = (dir: string) => join(dir, `chronicle-empty-${process.getuid?.()}`)
  const planted = (dir: string, plant: (path: string) => void) => {
    plant(shared(dir))
    const file = emptyFileIn(dir)
    expect(file).not.toBe(shared(dir))
    expect(readFileSync(file, 'utf8')).toBe('')
    expect(statSync(file).mode & 0o222).toBe(0)
  }

  it('is one per user, made once, reused', () => {
    const dir = join(root, 'tmp-a')
    mkdirSync(dir)
    expect(emptyFileIn(dir)).toBe(shared(dir))
    expect(emptyFileIn(dir)).toBe(shared(dir))
    expect(statSync(shared(dir))).toMatchObject({ size: 0 })
  })

  it('one planted with content, writable, a symlink, or owned by another user is never used', () => {
    const cases: [string, (path: string) => void][] = [
      ['content', (p) => writeFileSync(p, 'registry=https://evil.example/\n', { mode: 0o444 })],
      ['writable', (p) => writeFileSync(p, '', { mode: 0o666 })],
      ['a symlink', (p) => symlinkSync(join(home, '.ssh', 'id_ed25519'), p)],
      [
        'another user', // chown: the suite runs as root, as bubblewrap's specs do
        (p) => {
          writeFileSync(p, '', { mode: 0o444 })
          chownSync(p, 65534, 65534)
        },
      ],
    ]
    for (const [what, plant] of cases) {
      const dir = join(root, `tmp-${what.replace(/ /g, '-')}`)
      mkdirSync(dir)
      planted(dir, plant)
    }
  })

  it('one that turns bad after it was made is dropped for a private one', () => {
    const dir = join(root, 'tmp-later')
    mkdirSync(dir)
    expect(emptyFileIn(dir)).toBe(shared(dir))
    chmodSync(shared(dir), 0o644)
    writeFileSync(shared(dir), 'PLANTED\n')
    expect(emptyFileIn(dir)).not.toBe(shared(dir))
  })
})
