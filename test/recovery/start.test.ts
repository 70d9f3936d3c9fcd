import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { afterEach, describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import type { ChronicleEvent } from '../../src/events/catalogue.js'
import { createChronicle, type Chronicle } from '../../src/main.js'
import { openStore } from '../../src/projections/open.js'
import { getSession } from '../../src/projections/queries/read-model.js'
import { createShadowStore } from '../../src/runtime/workspace/shadow-store.js'
import { Client } from '../http/helpers.js'

/**
 * start() recovers before it listens: a data directory left by a crash (a bash
 * call running, an input waiting) is settled by the time a client can connect,
 * and the run continues in the background; the client catches up from its
 * seq and sees the rest live, without gap or duplicate.
 */

let chronicle: Chronicle | undefined
let dir: string | undefined
afterEach(async () => {
  await chronicle?.stop()
  if (dir) rmSync(dir, { recursive: true, force: true })
  chronicle = undefined
})

describe('start() after a crash', () => {
  it('settles before accepting connections, resumes the run, and a reconnecting client continues from its seq', async () => {
    dir = mkdtempSync(join(tmpdir(), 'chronicle-start-'))
    const dataDir = join(dir, 'data')
    const script = join(dir, 'script.json')
    writeFileSync(
      script,
      JSON.stringify({
        steps: [
          { when: { afterToolResult: true }, text: 'The job was interrupted; I will not assume it ran.' },
          { when: {}, text: 'Hello again.' },
        ],
      }),
    )
    const model = `scripted:${script}`
    const s = 'ses_0crashed'
    mkdirSync(dataDir)
    const before = openStore(join(dataDir, 'chronicle.db'))
    const crashed: ChronicleEvent[] = [
      { type: 'session.created', data: { directory: dir, agent: 'build', model } },
      {
        type: 'input.accepted',
        data: {
          inputId: 'in_1',
          parts: [{ type: 'text', text: 'run the job' }],
          delivery: 'queue',
          noReply: false,
          digest: 'a',
        },
      },
      { type: 'run.started', data: { runId: 'run_0a', reason: 'input' } },
      { type: 'input.delivered', data: { inputId: 'in_1', messageId: 'msg_0u', partIds: ['prt_0u'] } },
      {
        type: 'message.created',
        data: { messageId: 'msg_0a', role: 'assistant', parentId: 'msg_0u', agent: 'build', model },
      },
      { type: 'tool.input.started', data: { messageId: 'msg_0a', partId: 'prt_0c', callId: 'call_0', tool: 'bash' } },
      { type: 'message.completed', data: { messageId: 'msg_0a', finish: 'tool-calls', usage: {} } },
      {
        type: 'tool.called',
        data: { messageId: 'msg_0a', partId: 'prt_0c', callId: 'call_0', tool: 'bash', input: { command: 'sleep 5' } },
      },
      {
        type: 'input.accepted',
        data: {
          inputId: 'in_2',
          parts: [{ type: 'text', text: 'and say hello' }],
          delivery: 'queue',
          noReply: false,
          digest: 'b',
        },
      },
    ]
    before.append(s, crashed, { meta: { actor: 'runtime' } })
    const cursor = before.head()
    before.close()

    const sink = new Writable({ write: (_c, _e, done) => done() })
    const config = loadConfig({
      env: { CHRONICLE_DATA_DIR: dataDir, CHRONICLE_PORT: '0', CHRONICLE_MODEL: model },
      cwd: dir,
    })
    chronicle = await createChronicle(config, { logDestination: sink, directory: dir })
    const url = await chronicle.start()
    expect(chronicle.recovery).toMatchObject({
      resumed: [{ sessionId: s, runId: 'run_0a', attempt: 1 }],
      cancelled: [],
      failed: [],
    })

    const client = await Client.connect(`${url.replace(/^http/, 'ws')}/ws`, chronicle.token.token)
    const sub = await client.call('subscribe', { sessions: [s], after: cursor })
    expect(sub.error).toBeUndefined()
    const done = await client.wait(
      (f) => f.type === 'event' && (f as { event?: { type?: string } }).event?.type === 'run.finished',
    )
    const events = client.events() as unknown as {
      seq: number
      event: { type: string; data: Record<string, unknown> }
    }[]
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => cursor + 1 + i)) // contiguous from the cursor
    expect(events[0]?.event).toMatchObject({
      type: 'tool.failed',
      data: { partId: 'prt_0c', error: { kind: 'interrupted' } },
    })
    expect(events[1]?.event).toMatchObject({ type: 'run.resumed', data: { runId: 'run_0a', attempt: 1 } })
    expect(events.filter((e) => e.event.type === 'input.delivered').map((e) => e.event.data['inputId'])).toEqual([
      'in_2',
    ])
    expect((done as { event: { data: unknown } }).event.data).toEqual({ runId: 'run_0a', outcome: 'idle' })
    expect(events.some((e) => e.event.type === 'tool.called')).toBe(false) // the interrupted job is never re-run
    client.close()
  })
})

describe('start() after a crash cut off a tool in a run it does not continue', () => {
  it.each([
    ['failed: past the resume budget', [] as ChronicleEvent[], { failed: 1, cancelled: 0 }],
    [
      'cancelled: the user had asked to stop',
      [{ type: 'run.cancel.requested', data: { runId: 'run_0a' } }] as ChronicleEvent[],
      { failed: 0, cancelled: 1 },
    ],
  ])('records the files the cut-off call left (%s)', async (_, more, ended) => {
    dir = mkdtempSync(join(tmpdir(), 'chronicle-start-'))
    const dataDir = join(dir, 'data')
    const work = join(dir, 'work')
    mkdirSync(dataDir)
    mkdirSync(work)
    writeFileSync(join(work, 'a.txt'), 'a\n')
    const shadow = createShadowStore({ root: join(dataDir, 'workspaces'), globalExcludes: null })
    const baseline = await shadow.snapshot(work)
    shadow.close()
    const model = 'scripted:none'
    const s = 'ses_0crashed'
    const before = openStore(join(dataDir, 'chronicle.db'))
    before.append(
      s,
      [
        { type: 'session.created', data: { directory: work, agent: 'build', model } },
        { type: 'workspace.snapshotted', data: { tree: baseline.tree, reason: 'step', changed: [] } },
        { type: 'run.started', data: { runId: 'run_0a', reason: 'input' } },
        {
          type: 'message.created',
          data: { messageId: 'msg_0a', role: 'assistant', agent: 'build', model },
        },
        {
          type: 'tool.called',
          data: {
            messageId: 'msg_0a',
            partId: 'prt_0c',
            callId: 'call_0',
            tool: 'bash',
            input: { command: 'printf b > b.txt; sleep 5' },
          },
        },
        ...more,
      ],
      { meta: { actor: 'runtime' } },
    )
    before.close()
    writeFileSync(join(work, 'b.txt'), 'b') // what the call did before the kill

    const sink = new Writable({ write: (_c, _e, done) => done() })
    const config = loadConfig({ env: { CHRONICLE_DATA_DIR: dataDir, CHRONICLE_PORT: '0' }, cwd: dir })
    chronicle = await createChronicle(config, { logDestination: sink, directory: dir, resumeBudget: 0 })
    await chronicle.start()
    expect(chronicle.recovery?.failed.length).toBe(ended.failed)
    expect(chronicle.recovery?.cancelled.length).toBe(ended.cancelled)

    const events = chronicle.store.readSession(s)
    const last = events.at(-1)
    expect(last?.type).toBe('workspace.snapshotted')
    expect(last?.meta.actor).toBe('recovery')
    expect(last?.data).toMatchObject({ reason: 'recovery', changed: [{ path: 'b.txt', status: 'added' }] })
    expect(getSession(chronicle.store, s)?.workspace?.tree).not.toBe(baseline.tree)
  })
})
