import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { createHash } from 'node:crypto'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Proc, run, runToEnd } from '../cli/helpers.js'

/**
 * Backups while serving, and restore (docs/BACKUP.md), with real processes:
 * `chronicle serve` streaming sessions through the scripted model, the
 * `chronicle backup` CLI taking a backup mid-stream, `chronicle restore`
 * into a fresh data directory, `chronicle verify` there, and a server on the
 * restored store answering as the live one did at the backup's seq.
 */

const SLOW = 180_000
/** no server listens here: restore's check that the server is stopped finds none */
const NOBODY = 'http://127.0.0.1:9'

const SCRIPT = {
  chunkSize: 3,
  steps: [
    {
      when: { afterToolResult: false, userContains: 'write' },
      toolCalls: [{ id: 'call_w', name: 'write', input: { filePath: 'notes.md', content: 'backed up\n' } }],
    },
    { when: { afterToolResult: true }, text: 'Written.' },
    // long enough (about 8 s) that the backup is taken while these stream
    { when: { afterToolResult: false }, delayMs: 7, text: 'streamed '.repeat(400) },
  ],
}

let live: { dir: string; url: string; env: Record<string, string>; server: Proc }
let token: string
let backupDir: string
let head: { seq: number; digest: string }
const sessions: string[] = []

async function call(url: string, method: string, path: string, body?: unknown, bearer = token) {
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${bearer}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  })
  return { status: res.status, body: (await res.json()) as Record<string, any> }
}

const fileDigest = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex')

beforeAll(async () => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'chronicle-backup-')))
  writeFileSync(join(dir, 'script.json'), JSON.stringify(SCRIPT))
  // the config the server and the restored one read: writes allowed, so the scripted write needs no answer
  writeFileSync(
    join(dir, 'chronicle.json'),
    JSON.stringify({ permission: [{ permission: 'edit', pattern: '*', action: 'allow' }] }),
  )
  const env = {
    CHRONICLE_DATA_DIR: join(dir, 'data'),
    CHRONICLE_PORT: '0',
    CHRONICLE_MODEL: `scripted:${join(dir, 'script.json')}`,
    CHRONICLE_LOG_LEVEL: 'warn',
  }
  const server = run(['serve', '--config', join(dir, 'chronicle.json')], env, dir)
  const [, url] = (await server.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/)) as string[]
  live = { dir, url: url as string, env: { ...env, CHRONICLE_URL: url as string }, server }
  token = readFileSync(join(dir, 'data', 'token'), 'utf8').trim()
  backupDir = join(dir, 'backup')
}, SLOW)

afterAll(async () => {
  live?.server.child.kill('SIGTERM')
  await live?.server.exited
  if (live) rmSync(live.dir, { recursive: true, force: true })
})

describe('chronicle backup while sessions stream, then restore', () => {
  it(
    'restores into a fresh data dir: verify clean, the same head digest at the backup seq, sessions read as they were',
    async () => {
      const work = join(live.dir, 'work')
      mkdirSync(work)
      // one session writes a file (a workspace snapshot with objects), then several stream long answers
      const writer = (await call(live.url, 'POST', '/sessions', { directory: work })).body.session.id as string
      await call(live.url, 'POST', `/sessions/${writer}/inputs?wait=true`, {
        parts: [{ type: 'text', text: 'write it' }],
      })
      sessions.push(writer)
      for (let i = 0; i < 4; i++) {
        const id = (await call(live.url, 'POST', '/sessions', { directory: work })).body.session.id as string
        sessions.push(id)
        await call(live.url, 'POST', `/sessions/${id}/inputs`, { parts: [{ type: 'text', text: `stream ${i}` }] })
      }
      const streaming = async () =>
        (await call(live.url, 'GET', '/sessions')).body.sessions.filter((s: { status: string }) => s.status === 'busy')
          .length
      while ((await streaming()) < 4) await new Promise((r) => setTimeout(r, 20))

      const taken = await runToEnd(['backup', '--out', backupDir], live.env)
      expect(taken.stderr).toBe('')
      expect(taken.code).toBe(0)
      const printed = /^head (\d+):([0-9a-f]{64})$/m.exec(taken.stdout)
      expect(printed).not.toBeNull()
      head = { seq: Number(printed?.[1]), digest: printed?.[2] as string }
      expect(readdirSync(backupDir).sort()).toEqual(['chronicle.db', 'manifest.json', 'workspaces'])
      expect(JSON.parse(readFileSync(join(backupDir, 'manifest.json'), 'utf8'))).toMatchObject({
        format: 'chronicle-backup',
        formatVersion: 1,
        seq: head.seq,
        digest: head.digest,
      })

      // the live log went on; what it held at the backup's seq is what the backup holds
      const lastSeqs = await Promise.all(
        sessions.map(async (id) => {
          const page = await call(live.url, 'GET', `/sessions/${id}/events?before=${head.seq + 1}&limit=5000`)
          return (page.body.events as { seq: number }[]).at(-1)?.seq as number
        }),
      )
      const stateOf = (url: string, bearer: string) =>
        Promise.all(
          sessions.map(
            async (id, i) =>
              (await call(url, 'GET', `/sessions/${id}/state?at=${lastSeqs[i]}`, undefined, bearer)).body,
          ),
        )
      const before = await stateOf(live.url, token)
      expect(before.map((state) => state.session?.id)).toEqual(sessions)
      expect(before.filter((state) => state.session.status === 'busy').length).toBeGreaterThan(0) // taken mid-stream
      const files = (await call(live.url, 'GET', `/sessions/${writer}/files?at=${lastSeqs[0]}&path=notes.md`)).body
      expect(files).toMatchObject({ path: 'notes.md', content: 'backed up\n' })

      const fresh = join(live.dir, 'restored')
      const restored = await runToEnd(['restore', backupDir], { CHRONICLE_DATA_DIR: fresh, CHRONICLE_URL: NOBODY })
      expect([restored.code, restored.stderr]).toEqual([0, expect.any(String)])
      expect(restored.stdout).toBe(
        `restored the store at seq ${head.seq}, head ${head.seq}:${head.digest} (taken ${expect.any(String) as unknown as string})\nthere was no store to replace\n`.replace(
          /\(taken .*\)/,
          restored.stdout.match(/\(taken .*\)/)?.[0] ?? '',
        ),
      )
      const verified = await runToEnd(['verify', '--head', `${head.seq}:${head.digest}`], {
        CHRONICLE_DATA_DIR: fresh,
        CHRONICLE_URL: NOBODY,
      })
      expect([verified.code, verified.stdout]).toEqual([
        0,
        `chain intact: ${head.seq} events; head ${head.seq}:${head.digest}\n${sessions.length} sessions checked, 0 differences\nno search index (the server builds it when it starts)\n`,
      ])

      const again = run(
        ['serve', '--config', join(live.dir, 'chronicle.json')],
        { ...live.env, CHRONICLE_DATA_DIR: fresh },
        live.dir,
      )
      try {
        const [, url] = (await again.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/)) as string[]
        const bearer = readFileSync(join(fresh, 'token'), 'utf8').trim()
        // a restart settles the runs the backup caught mid-stream: compared at the backup's seq
        const after = await stateOf(url as string, bearer)
        expect(after).toEqual(before)
        expect(
          (
            await call(
              url as string,
              'GET',
              `/sessions/${writer}/files?at=${lastSeqs[0]}&path=notes.md`,
              undefined,
              bearer,
            )
          ).body,
        ).toEqual(files)
      } finally {
        again.child.kill('SIGTERM')
        await again.exited
      }
    },
    SLOW,
  )

  it('refuses a backup from a token that is not an admin, or an admin limited to some sessions', async () => {
    const operate = (await call(live.url, 'POST', '/tokens', { name: 'ops', role: 'operate' })).body.token as string
    const out = join(live.dir, 'not-taken')
    expect((await call(live.url, 'POST', '/admin/backup', { out }, operate)).body).toMatchObject({
      status: 403,
      code: 'FORBIDDEN',
      detail: 'store.backup needs the admin role; token ops has operate',
    })
    const limited = (await call(live.url, 'POST', '/tokens', { name: 'one', role: 'admin', sessions: [sessions[0]] }))
      .body.token as string
    expect((await call(live.url, 'POST', '/admin/backup', { out }, limited)).body).toMatchObject({
      status: 403,
      code: 'FORBIDDEN',
    })
    const cli = await runToEnd(['backup', '--out', out], { ...live.env, CHRONICLE_TOKEN: operate })
    expect([cli.code, cli.stderr]).toEqual([1, expect.stringContaining('FORBIDDEN')])
    expect(existsSync(out)).toBe(false)
  })
})

describe('chronicle restore refuses what it cannot trust, and replaces nothing', () => {
  /** a data dir with a store of its own, to see that a refused restore leaves it as it was */
  let target: string
  let targetDb: string
  let original: string

  beforeAll(async () => {
    target = join(live.dir, 'target')
    const first = await runToEnd(['restore', backupDir], { CHRONICLE_DATA_DIR: target, CHRONICLE_URL: NOBODY })
    expect(first.code).toBe(0)
    targetDb = join(target, 'chronicle.db')
    original = fileDigest(targetDb)
  }, SLOW)

  /** a copy of the good backup, changed by `damage`, and the restore's answer */
  async function restoreDamaged(name: string, damage: (dir: string) => void) {
    const dir = join(live.dir, `bad-${name}`)
    cpSync(backupDir, dir, { recursive: true })
    damage(dir)
    const result = await runToEnd(['restore', dir], { CHRONICLE_DATA_DIR: target, CHRONICLE_URL: NOBODY })
    expect(fileDigest(targetDb)).toBe(original)
    expect(readdirSync(target).filter((f) => f.startsWith('replaced-') || f.startsWith('.restore-'))).toEqual([])
    return result
  }

  const refused = (reason: RegExp) => ({
    code: 1,
    stdout: '',
    // after the progress lines of the checks it got to
    stderr: expect.stringMatching(new RegExp(`(^|\\n)chronicle: (?:${reason.source}); nothing was replaced\\n$`)),
  })

  /**
   * The store's check at open hashes its last 1,000 events again and names the first that does not match; verify
   * recomputes the rest. How many events the scripted session left depends on how its deltas merged (more under
   * load), so the damaged event is found by one or the other: either names the chain.
   */
  const CHAIN_NAMES_IT =
    /(?:its store is damaged: hash chain: seq \d+ \(ses_\w+\)|its hash chain breaks at seq \d+): its hash does not match the event and its chain/

  it('a flipped byte in an event: the chain names it', async () => {
    const result = await restoreDamaged('event-byte', (dir) => {
      const file = join(dir, 'chronicle.db')
      const bytes = readFileSync(file)
      // the prompt is in its input.accepted event and in the read models: each copy flipped
      let flipped = 0
      for (let at = bytes.indexOf('write it'); at !== -1; at = bytes.indexOf('write it', at + 1), flipped++)
        bytes[at] = 'W'.charCodeAt(0)
      expect(flipped).toBeGreaterThan(0)
      writeFileSync(file, bytes)
    })
    expect(result).toEqual(refused(CHAIN_NAMES_IT))
  })

  it("a flipped byte in a page's header: SQLite's integrity check names it", async () => {
    const result = await restoreDamaged('page-byte', (dir) => {
      const file = join(dir, 'chronicle.db')
      const bytes = readFileSync(file)
      bytes[2048 * 3] = 0xff // the page type of page 4: no b-tree page has it
      writeFileSync(file, bytes)
    })
    expect(result).toEqual(refused(/its store is damaged: .*/))
  })

  it('a forged event (the append-only trigger dropped, a time rewritten): the chain names it', async () => {
    const result = await restoreDamaged('forged', (dir) => {
      const db = new Database(join(dir, 'chronicle.db'))
      db.exec('DROP TRIGGER event_log_no_update')
      db.prepare('UPDATE event_log SET at = at + 1 WHERE seq = 2').run()
      db.close()
    })
    expect(result).toEqual(refused(CHAIN_NAMES_IT))
  })

  it("a manifest that is not the store's: the heads differ", async () => {
    const result = await restoreDamaged('manifest', (dir) => {
      const file = join(dir, 'manifest.json')
      const manifest = JSON.parse(readFileSync(file, 'utf8'))
      writeFileSync(file, JSON.stringify({ ...manifest, digest: 'f'.repeat(64) }))
    })
    expect(result).toEqual(refused(/its log's head is \d+:[0-9a-f]{64}, not the manifest's \d+:f{64}/))
  })

  it('a --head that backup did not print: refused at that seq', async () => {
    const result = await runToEnd(['restore', backupDir, '--head', `${head.seq}:${'0'.repeat(64)}`], {
      CHRONICLE_DATA_DIR: target,
      CHRONICLE_URL: NOBODY,
    })
    expect(result).toEqual(
      refused(/its hash chain breaks at seq \d+: the log up to seq \d+ no longer gives the digest recorded for it/),
    )
    expect(fileDigest(targetDb)).toBe(original)
  })

  it('a symlink, or a damaged workspace object: refused', async () => {
    const link = await restoreDamaged('symlink', (dir) =>
      symlinkSync('/etc/passwd', join(dir, 'workspaces', 'ws', 'x')),
    )
    expect(link).toEqual(refused(/.*workspaces\/ws\/x is not something a backup holds/))
    const object = await restoreDamaged('object', (dir) => {
      const objects = join(dir, 'workspaces', 'objects.git', 'objects')
      const fan = readdirSync(objects).find((d) => /^[0-9a-f]{2}$/.test(d)) as string
      const file = join(objects, fan, readdirSync(join(objects, fan))[0] as string)
      writeFileSync(file, Buffer.from('not zlib at all'))
    })
    expect(object).toEqual(refused(/the backup's workspace objects are damaged: .*/))
  })

  it('a directory that is not a backup', async () => {
    const result = await restoreDamaged('no-manifest', (dir) => rmSync(join(dir, 'manifest.json')))
    expect(result).toEqual(
      refused(/.*bad-no-manifest has no manifest.json: not a Chronicle backup, or one that did not finish/),
    )
  })

  it('while a server runs: refused, nothing replaced', async () => {
    const result = await runToEnd(['restore', backupDir], { CHRONICLE_DATA_DIR: target, CHRONICLE_URL: live.url })
    expect(result).toEqual({
      code: 1,
      stdout: '',
      stderr: `chronicle: a server is running at ${live.url}: stop it first, then restore (nothing was replaced)\n`,
    })
    expect(fileDigest(targetDb)).toBe(original)
  })

  it('while a server serves that data dir at a port CHRONICLE_URL does not name: refused, naming it; nothing replaced', async () => {
    const dataDir = live.env.CHRONICLE_DATA_DIR as string
    const served = join(dataDir, 'chronicle.db')
    // the file itself, not its bytes: the live server may write to it meanwhile (its snapshots, a checkpoint)
    const before = statSync(served).ino
    const result = await runToEnd(['restore', backupDir], { CHRONICLE_DATA_DIR: dataDir, CHRONICLE_URL: NOBODY })
    expect(result).toEqual({
      code: 1,
      stdout: '',
      stderr: `chronicle: a server (pid ${live.server.child.pid}) is serving ${dataDir} at ${live.url}: stop it first, then restore (nothing was replaced)\n`,
    })
    expect(readdirSync(dataDir).filter((f) => f.startsWith('replaced-') || f.startsWith('restoring-'))).toEqual([])
    expect(statSync(served).ino).toBe(before)
  })

  it('a server that stopped leaves no record behind, and one that died is not taken for a running one', async () => {
    const dir = mkdtempSync(join(live.dir, 'stopped-'))
    const env = { CHRONICLE_DATA_DIR: join(dir, 'data'), CHRONICLE_PORT: '0', CHRONICLE_LOG_LEVEL: 'warn' }
    const server = run(['serve'], env, dir)
    const [, url] = (await server.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/)) as string[]
    const record = join(dir, 'data', 'server.json')
    expect(JSON.parse(readFileSync(record, 'utf8'))).toEqual({ pid: server.child.pid, url })
    server.child.kill('SIGTERM')
    expect([await server.exited, server.stderr]).toEqual([0, ''])
    expect(existsSync(record)).toBe(false)

    // a record whose process is gone (a server killed with -9): restore goes ahead
    writeFileSync(record, JSON.stringify({ pid: server.child.pid, url }))
    const result = await runToEnd(['restore', backupDir], {
      CHRONICLE_DATA_DIR: join(dir, 'data'),
      CHRONICLE_URL: NOBODY,
    })
    expect(result.code).toBe(0)
    expect(result.stdout).toMatch(/^restored the store at seq \d+/)
  })

  it('a good backup over a store: the replaced store is kept aside', async () => {
    const result = await runToEnd(['restore', backupDir], { CHRONICLE_DATA_DIR: target, CHRONICLE_URL: NOBODY })
    expect(result.code).toBe(0)
    const aside = readdirSync(target).filter((f) => f.startsWith('replaced-'))
    expect(aside).toHaveLength(1)
    expect(result.stdout).toContain(`the replaced store is kept in ${join(target, aside[0] as string)}\n`)
    expect(fileDigest(join(target, aside[0] as string, 'chronicle.db'))).toBe(original)
  })
})
