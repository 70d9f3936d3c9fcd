import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startServer, type TestServer } from '../http/helpers.js'
import { runInProcess } from './helpers.js'

/** `chronicle search` against a real server: each hit with the line that opens it there; --json as the API answers. */

let server: TestServer
let env: Record<string, string>
let session: string
let seq: number

beforeAll(async () => {
  server = await startServer({ CHRONICLE_LOG_LEVEL: 'warn' }, { listen: true })
  env = { CHRONICLE_URL: server.url, CHRONICLE_TOKEN: server.token }
  const headers = { authorization: `Bearer ${server.token}` }
  const created = await server.chronicle.app.inject({
    method: 'POST',
    url: '/sessions',
    headers,
    payload: { directory: server.dir, title: 'Build cleanup' },
  })
  session = (created.json() as { session: { id: string } }).session.id
  const accepted = await server.chronicle.app.inject({
    method: 'POST',
    url: `/sessions/${session}/inputs`,
    headers,
    payload: { parts: [{ type: 'text', text: 'please run rm -rf build then --force the push' }], noReply: true },
  })
  seq = (accepted.json() as { seq: number }).seq
}, 60_000)
afterAll(() => server.close())

describe('chronicle search', () => {
  it('prints each hit: title, session, what and who, the snippet, and `chronicle show … --at seq`', async () => {
    const out = await runInProcess(['search', '"rm -rf build"'], env)
    const at = (out.stdout.match(/ · (\d{4}-\d\d-\d\d \d\d:\d\d) · /) ?? [])[1]
    expect([out.code, out.stdout, out.stderr]).toEqual([
      0,
      `Build cleanup ${session}  input · owner · ${at} · seq ${seq}\n` +
        '  please run rm -rf build then --force the push\n' +
        `  chronicle show ${session} --at ${seq}\n`,
      '',
    ])
  })

  it('--json prints the API’s answer', async () => {
    // a query that starts with a dash goes after `--`, as for any command
    const out = await runInProcess(['search', '--json', '--', '--force'], env)
    expect(out.code).toBe(0)
    expect(JSON.parse(out.stdout)).toMatchObject({
      hits: [{ session, seq, snippet: 'please run rm -rf build then --force the push', highlights: [[29, 36]] }],
      indexedThrough: seq,
      head: seq,
    })
  })

  it('no hits, said so; a malformed query is the server’s BAD_QUERY, exit 1', async () => {
    expect((await runInProcess(['search', 'pelican'], env)).stdout).toBe('(no hits)\n')
    const bad = await runInProcess(['search', 'type:nothing'], env)
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain('BAD_QUERY')
  })
})
