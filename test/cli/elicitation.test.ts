import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ELICIT_SERVER, elicitScript } from '../http/elicitation-fixture.js'
import { type Proc, run, runToEnd } from './helpers.js'

/**
 * A tool server's question in the terminal: `chronicle chat` shows it and
 * asks its form's fields line by line, and `chronicle run` (nobody to ask)
 * declines it and says so, so neither looks hung. Real processes: the
 * server, the eliciting MCP server it starts, and the CLI on real pipes.
 */

const SLOW = 90_000

let dir: string
let env: Record<string, string>
let server: Proc
let url: string

type Ev = { seq: number; type: string; data: Record<string, unknown> }
async function api<T>(path: string): Promise<T> {
  const token = readFileSync(join(dir, 'data', 'token'), 'utf8').trim()
  const res = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } })
  return (await res.json()) as T
}
const answers = async (session: string) =>
  (await api<{ events: Ev[] }>(`/sessions/${session}/events?limit=5000`)).events
    .filter((e) => e.type === 'elicitation.answered')
    .map((e) => ({ action: e.data.action, content: e.data.content }))

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'chronicle-cli-elicit-'))
  mkdirSync(join(dir, 'data'))
  writeFileSync(join(dir, 'script.json'), JSON.stringify(elicitScript))
  // MCP servers and rules come from the user's config file only: the data dir's
  writeFileSync(
    join(dir, 'data', 'chronicle.json'),
    JSON.stringify({
      mcp: { elicit: { type: 'local', command: [process.execPath, ELICIT_SERVER] } },
      permission: [{ permission: 'elicit_*', pattern: '*', action: 'allow' }],
    }),
  )
  const base = {
    CHRONICLE_DATA_DIR: join(dir, 'data'),
    CHRONICLE_PORT: '0',
    CHRONICLE_MODEL: `scripted:${join(dir, 'script.json')}`,
    CHRONICLE_LOG_LEVEL: 'warn',
  }
  server = run(['serve'], base, dir)
  url = (await server.waitFor(/listening on (http:\/\/127\.0\.0\.1:\d+)/))[1] as string
  env = { ...base, CHRONICLE_URL: url }
  for (const end = Date.now() + 30_000; ; await new Promise((r) => setTimeout(r, 100))) {
    const { servers } = await api<{ servers: { name: string; state: string }[] }>('/mcp/servers')
    if (servers.some((s) => s.name === 'elicit' && s.state === 'ready')) break
    if (Date.now() > end) throw new Error(`the MCP server did not become ready: ${JSON.stringify(servers)}`)
  }
}, SLOW)

afterAll(async () => {
  server?.child.kill('SIGTERM')
  await server?.exited
  rmSync(dir, { recursive: true, force: true })
})

describe('a tool server’s question in the terminal', () => {
  it(
    'chat shows it and asks its fields one line at a time; a bad value is said and asked again; Enter keeps a default',
    async () => {
      const chat = run(['chat', '--directory', dir], env, dir)
      const session = (await chat.waitFor(/session (ses_\w+)/))[1] as string
      chat.child.stdin.write('#book a table\n')
      await chat.waitFor(/\? elicit asks: Who is the booking for\?\n/)
      await chat.waitFor(/ {2}Name\* \(text\): $/)
      chat.child.stdin.write('Ada\n')
      await chat.waitFor(/ {2}seats \(integer, default 2\): $/)
      chat.child.stdin.write('lots\n')
      await chat.waitFor(/ {2}seats: lots is not a whole number\n {2}seats \(integer, default 2\): $/)
      chat.child.stdin.write('3\n')
      await chat.waitFor(/ {2}newsletter \(y\/n, default n\): $/)
      chat.child.stdin.write('\n')
      await chat.waitFor(/Done\.\n/)
      chat.child.stdin.end()
      expect(await chat.exited).toBe(0)
      expect(await answers(session)).toEqual([
        { action: 'accept', content: { name: 'Ada', seats: 3, newsletter: false } },
      ])
    },
    SLOW,
  )

  it(
    'chat declines with /decline',
    async () => {
      const chat = run(['chat', '--directory', dir], env, dir)
      const session = (await chat.waitFor(/session (ses_\w+)/))[1] as string
      chat.child.stdin.write('#book again\n')
      await chat.waitFor(/ {2}Name\* \(text\): $/)
      chat.child.stdin.write('/decline\n')
      await chat.waitFor(/Done\.\n/)
      chat.child.stdin.end()
      expect(await chat.exited).toBe(0)
      expect(await answers(session)).toEqual([{ action: 'decline', content: undefined }])
    },
    SLOW,
  )

  it(
    'run, with nobody to ask, declines it and says so on stderr; the run goes on and ends',
    async () => {
      const r = await runToEnd(['run', '--directory', dir, '#book headless'], env)
      expect(r.code).toBe(0)
      expect(r.stdout).toBe('Done.\n')
      expect(r.stderr).toContain("chronicle: declined elicit's question (a headless run cannot answer it)\n")
    },
    SLOW,
  )
})
