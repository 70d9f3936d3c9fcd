import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import Database from 'better-sqlite3'
import { afterAll, describe, expect, it } from 'vitest'
import { openStore } from '../../src/projections/open.js'
import { run, runToEnd } from '../cli/helpers.js'

/**
 * Damaged files are found, not served (docs/BACKUP.md "Damaged files"), with
 * the real `chronicle serve`: a flipped byte in the store refuses the start,
 * naming the file and what verify and restore can do; a torn WAL recovers to
 * the last commit it holds whole; a workspace object deleted from the object
 * store fails the one operation that needs it, and nothing else.
 */

const SLOW = 120_000
const NOBODY = 'http://127.0.0.1:9'
const dir = realpathSync(mkdtempSync(join(tmpdir(), 'chronicle-damage-')))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

let n = 0
/** a data dir whose store holds two sessions, the last event a prompt saying `canary-last` */
function dataDirWithStore(): string {
  const data = join(dir, `data-${n++}`)
  mkdirSync(data, { mode: 0o700 })
  const store = openStore(join(data, 'chronicle.db'))
  const meta = { actor: 'user' as const }
  for (const [id, text] of [
    ['ses_a', 'first prompt'],
    ['ses_b', 'canary-last'],
  ] as const) {
    store.append(id, [{ type: 'session.created', data: { directory: dir, agent: 'build', model: null } }], { meta })
    store.append(
      id,
      [
        {
          type: 'input.accepted',
          data: { inputId: `in_${id}`, parts: [{ type: 'text', text }], delivery: 'queue', noReply: true, digest: 'x' },
        },
      ],
      { meta },
    )
  }
  store.close()
  return data
}

function flip(file: string, change: (bytes: Buffer) => void): void {
  const bytes = readFileSync(file)
  change(bytes)
  writeFileSync(file, bytes)
}

async function serveOn(data: string) {
  return runToEnd(['serve'], { CHRONICLE_DATA_DIR: data, CHRONICLE_PORT: '0', CHRONICLE_LOG_LEVEL: 'warn' })
}

const refusal = (file: string, problem: string) =>
  `chronicle: the store ${file} is damaged and will not be served: ${problem}. ` +
  '`chronicle verify` (server stopped) names every damaged event and read model; ' +
  '`chronicle restore <backup>` puts a backup back, keeping this store aside (docs/BACKUP.md)\n'

describe('a damaged store is refused at start', () => {
  it(
    'a flipped byte in the last event: the chain names its seq; nothing is served, exit 1',
    async () => {
      const data = dataDirWithStore()
      const file = join(data, 'chronicle.db')
      flip(file, (bytes) => {
        for (let at = bytes.indexOf('canary-last'); at !== -1; at = bytes.indexOf('canary-last', at + 1))
          bytes[at] = 0x43
      })
      const served = await serveOn(data)
      expect(served).toEqual({
        code: 1,
        stdout: '',
        stderr: refusal(file, 'hash chain: seq 4 (ses_b): its hash does not match the event and its chain'),
      })
      // and verify names it too, as the message says
      const verify = await runToEnd(['verify'], { CHRONICLE_DATA_DIR: data, CHRONICLE_URL: NOBODY })
      expect([verify.code, verify.stdout.split('\n')[0]]).toEqual([
        1,
        'BROKEN seq 4 (ses_b): its hash does not match the event and its chain',
      ])
    },
    SLOW,
  )

  it(
    "a flipped byte in a page's header: SQLite cannot read the store",
    async () => {
      const data = dataDirWithStore()
      const file = join(data, 'chronicle.db')
      flip(file, (bytes) => {
        bytes[2048 * 3] = 0xff // the type of page 4: no b-tree page has it
      })
      const served = await serveOn(data)
      expect(served.code).toBe(1)
      expect(served.stdout).toBe('')
      // SQLite refuses the page as it reads it, before quick_check can list what is wrong
      expect(served.stderr).toBe(refusal(file, 'SQLite cannot read it: database disk image is malformed'))
    },
    SLOW,
  )
})

describe('a torn WAL', () => {
  it(
    'recovers to the last commit it holds whole: the server starts, verify is clean, the torn commit is gone',
    async () => {
      const data = join(dir, 'data-wal')
      mkdirSync(data, { mode: 0o700 })
      const file = join(data, 'chronicle.db')
      // a writer killed mid-stream leaves its commits in the WAL (test/events/durability.test.ts)
      const child = fileURLToPath(new URL('../events/fixtures/durable-child.ts', import.meta.url))
      const proc = spawn(process.execPath, ['--import', 'tsx', child, file], { stdio: ['ignore', 'pipe', 'pipe'] })
      let acks = 0
      await new Promise<void>((resolve) =>
        proc.stdout.on('data', (d: Buffer) => {
          acks += d.toString().split('\n').length - 1
          if (acks >= 100) resolve()
        }),
      )
      const killed = new Promise((resolve) => proc.on('exit', (_code, signal) => resolve(signal)))
      proc.kill('SIGKILL')
      expect(await killed).toBe('SIGKILL')
      const headOf = (path: string) => {
        const db = new Database(path)
        const head = db.prepare('SELECT MAX(seq) FROM event_log').pluck().get() as number
        db.close()
        return head
      }
      // the head the whole WAL gives, read from a copy
      const whole = join(dir, 'whole')
      mkdirSync(whole)
      copyFileSync(file, join(whole, 'chronicle.db'))
      copyFileSync(`${file}-wal`, join(whole, 'chronicle.db-wal'))
      const wholeHead = headOf(join(whole, 'chronicle.db'))
      expect(wholeHead).toBeGreaterThanOrEqual(100)

      // power lost mid-write: the last frame torn (a frame is 24 + 2048 bytes)
      truncateSync(`${file}-wal`, statSync(`${file}-wal`).size - 1000)
      const server = run(['serve'], { CHRONICLE_DATA_DIR: data, CHRONICLE_PORT: '0', CHRONICLE_LOG_LEVEL: 'warn' })
      const [, url] = (await server.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/)) as string[]
      expect((await fetch(`${url}/health`)).status).toBe(200)
      server.child.kill('SIGTERM')
      expect(await server.exited).toBe(0)
      const verify = await runToEnd(['verify'], { CHRONICLE_DATA_DIR: data, CHRONICLE_URL: NOBODY })
      expect(verify.code).toBe(0)
      const [, head] = /^chain intact: (\d+) events; head \1:[0-9a-f]{64}$/m.exec(verify.stdout) ?? []
      // the torn commit (two deltas, or the few a batch held) is gone; every commit before it is whole
      expect(Number(head)).toBeLessThan(wholeHead)
      expect(Number(head)).toBeGreaterThanOrEqual(wholeHead - 4)
      expect(verify.stdout).toMatch(
        /\n1 sessions checked, 0 differences\n(search index through seq \d+ of \d+: \d+ documents checked, 0 differences|no search index \(the server builds it when it starts\)|the search index was built from another log .*)\n$/,
      )
    },
    SLOW,
  )
})

describe('a deleted workspace object', () => {
  it(
    'fails the operation that needs it with WORKSPACE_DAMAGED; the session, its other snapshots and new runs go on',
    async () => {
      const work = join(dir, 'work')
      mkdirSync(work)
      writeFileSync(
        join(dir, 'script.json'),
        JSON.stringify({
          steps: [
            {
              when: { afterToolResult: false, userContains: 'first' },
              toolCalls: [{ id: 'call_1', name: 'write', input: { filePath: 'notes.md', content: 'first draft\n' } }],
            },
            {
              when: { afterToolResult: false, userContains: 'second' },
              toolCalls: [{ id: 'call_2', name: 'write', input: { filePath: 'other.md', content: 'other\n' } }],
            },
            { when: { afterToolResult: true }, text: 'Written.' },
          ],
        }),
      )
      writeFileSync(
        join(dir, 'chronicle.json'),
        JSON.stringify({ permission: [{ permission: 'edit', pattern: '*', action: 'allow' }] }),
      )
      const data = join(dir, 'data-ws')
      const server = run(['serve', '--config', join(dir, 'chronicle.json')], {
        CHRONICLE_DATA_DIR: data,
        CHRONICLE_PORT: '0',
        CHRONICLE_MODEL: `scripted:${join(dir, 'script.json')}`,
        CHRONICLE_LOG_LEVEL: 'warn',
      })
      try {
        const [, url] = (await server.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/)) as string[]
        const token = readFileSync(join(data, 'token'), 'utf8').trim()
        const call = async (method: string, path: string, body?: unknown) => {
          const res = await fetch(`${url}${path}`, {
            method,
            headers: {
              authorization: `Bearer ${token}`,
              ...(body !== undefined && { 'content-type': 'application/json' }),
            },
            ...(body !== undefined && { body: JSON.stringify(body) }),
          })
          return { status: res.status, body: (await res.json()) as Record<string, any> }
        }
        const id = (await call('POST', '/sessions', { directory: work })).body.session.id as string
        await call('POST', `/sessions/${id}/inputs?wait=true`, { parts: [{ type: 'text', text: 'first' }] })
        const seq = (await call('GET', `/sessions/${id}`)).body.session.lastSeq as number
        expect((await call('GET', `/sessions/${id}/files?at=${seq}&path=notes.md`)).body).toMatchObject({
          content: 'first draft\n',
        })

        const blob = createHash('sha1').update('blob 12\0first draft\n').digest('hex')
        unlinkSync(join(data, 'workspaces', 'objects.git', 'objects', blob.slice(0, 2), blob.slice(2)))

        const read = await call('GET', `/sessions/${id}/files?at=${seq}&path=notes.md`)
        expect(read.status).toBe(500)
        expect(read.body).toMatchObject({ code: 'WORKSPACE_DAMAGED' })
        expect(read.body.detail).toMatch(
          /^the workspace object store lacks an object this needs or cannot read it \(deleted or damaged\): .*`chronicle restore <backup>`/,
        )
        // what does not need that object still answers: the listing, the session, a new run
        expect((await call('GET', `/sessions/${id}/files?at=${seq}`)).body.files).toEqual([
          expect.objectContaining({ path: 'notes.md' }),
        ])
        const next = await call('POST', `/sessions/${id}/inputs?wait=true`, {
          parts: [{ type: 'text', text: 'second' }],
        })
        expect(next.body.text).toBe('Written.')
        expect((await call('GET', `/sessions/${id}`)).body.session.status).toBe('idle')
        expect((await fetch(`${url}/health`)).status).toBe(200)
      } finally {
        server.child.kill('SIGTERM')
        await server.exited
      }
    },
    SLOW,
  )
})
