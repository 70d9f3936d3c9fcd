import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { sqlitePorts } from '../../src/projections/store-ports.js'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { openStore } from '../../src/projections/open.js'
import { audit } from '../../src/runtime/audit/audit.js'
import { startServer, type ServerProcess } from '../crash/server-process.js'

/**
 * kill -9 in the middle of a background sub-agent (docs/RECOVERY.md "Sub-agents"): the real server as a
 * child process, killed while the child streams its answer and the parent is idle. On restart the
 * child's run resumes (its cut-off step settled, then run again: at-least-once), and when it ends its
 * result reaches the parent exactly once and the parent answers it. Every request still audits.
 */

const TOKEN = 'background-crash-token-0123456789abcdef'
const LONG = `child report: 42 ${'and more detail '.repeat(150)}`
const script = {
  chunkSize: 32,
  steps: [
    { when: { userContains: 'background sub-agent session' }, text: 'parent: the child said 42' },
    {
      when: { userContains: 'PARENT', afterToolResult: false },
      toolCalls: [
        {
          id: 'c_bg',
          name: 'task',
          input: { description: 'slow report', prompt: 'CHILD: report', subagent_type: 'general', background: true },
        },
      ],
    },
    { when: { userContains: 'PARENT', afterToolResult: true }, text: 'parent: started it, waiting' },
    { when: { userContains: 'CHILD:' }, text: LONG, delayMs: 40 },
  ],
}

interface WireEvent {
  readonly seq: number
  readonly type: string
  readonly data: Record<string, unknown>
}

let server: ServerProcess | undefined
let root: string | undefined
afterEach(async () => {
  await server?.kill('SIGKILL')
  if (root) rmSync(root, { recursive: true, force: true })
})

async function api<T>(path: string, body?: object): Promise<T> {
  const res = await fetch(`${server?.url}${path}`, {
    method: body ? 'POST' : 'GET',
    headers: { authorization: `Bearer ${TOKEN}`, ...(body && { 'content-type': 'application/json' }) },
    ...(body && { body: JSON.stringify(body) }),
  })
  if (!res.ok) throw new Error(`${path}: ${res.status} ${await res.text()}`)
  return (await res.json()) as T
}

const events = async (sessionId: string) =>
  (await api<{ events: WireEvent[] }>(`/sessions/${sessionId}/events?limit=5000`)).events

async function until(check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`condition not reached in time\n${server?.stderr() ?? ''}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('kill -9 during a background sub-agent', () => {
  it('the child resumes after the restart and its result reaches the parent once', async () => {
    root = mkdtempSync(join(tmpdir(), 'chronicle-bg-crash-'))
    const dataDir = join(root, 'data')
    const file = join(root, 'script.json')
    writeFileSync(file, JSON.stringify(script))
    const env = {
      CHRONICLE_DATA_DIR: dataDir,
      CHRONICLE_PORT: '0',
      CHRONICLE_HOST: '127.0.0.1',
      CHRONICLE_TOKEN: TOKEN,
      CHRONICLE_MODEL: `scripted:${file}`,
      CHRONICLE_LOG_LEVEL: 'warn',
      XDG_CONFIG_HOME: join(root, 'config'),
    }
    server = await startServer(env)
    const { session } = await api<{ session: { id: string } }>('/sessions', { directory: root })
    const id = session.id
    await api(`/sessions/${id}/inputs`, { parts: [{ type: 'text', text: 'PARENT: delegate the report' }] })

    let childId = ''
    await until(async () => {
      const parent = await events(id)
      childId = String(parent.find((e) => e.type === 'subtask.started')?.data.childSessionId ?? '')
      return childId !== '' && parent.some((e) => e.type === 'run.finished')
    })
    const before = await events(id)
    expect(before.filter((e) => e.type === 'run.finished').map((e) => e.data.outcome)).toEqual(['idle']) // it went on
    // … while the child was still running: mid-stream
    await until(async () => (await events(childId)).some((e) => e.type === 'text.delta'))
    expect((await events(childId)).some((e) => e.type === 'run.finished')).toBe(false)
    await server.kill('SIGKILL') // mid-stream in the child

    server = await startServer(env)
    expect(server.recovered).toMatchObject({ resumed: 1 }) // the child's run; the idle parent has none
    await until(async () => (await events(id)).filter((e) => e.type === 'run.finished').length === 2)

    const child = await events(childId)
    expect(child.filter((e) => e.type === 'run.resumed')).toHaveLength(1)
    expect(child.filter((e) => e.type === 'run.finished').map((e) => e.data.outcome)).toEqual(['idle'])
    const parent = await events(id)
    const reports = parent.filter((e) => e.type === 'input.accepted' && e.data.inputId === `subtask:${childId}`)
    expect(reports).toHaveLength(1)
    expect(JSON.stringify(reports[0]?.data)).toContain('child report: 42')
    expect(parent.filter((e) => e.type === 'subtask.finished').map((e) => e.data.outcome)).toEqual(['idle'])
    expect(parent.filter((e) => e.type === 'run.finished').map((e) => e.data.outcome)).toEqual(['idle', 'idle'])
    const answer = parent
      .filter((e) => e.type === 'text.delta')
      .map((e) => String(e.data.text))
      .join('')
    expect(answer).toContain('parent: the child said 42')

    await server.kill('SIGTERM')
    server = undefined
    const store = openStore(join(dataDir, 'chronicle.db'))
    try {
      const report = await audit(sqlitePorts(store), 'all')
      expect(report.mismatches).toEqual([])
      expect(report.verified).toBe(report.steps)
    } finally {
      store.close()
    }
  }, 120_000)
})
