import type { LanguageModelV3StreamPart } from '@ai-sdk/provider'
import { convertArrayToReadableStream, MockLanguageModelV3 } from 'ai/test'
import { harness } from './helpers.js'
import { afterEach, describe, expect, it } from 'vitest'
import { execute } from '../../src/commands/execute.js'
import type { StoredEvent } from '../../src/events/envelope.js'
import type { openStore } from '../../src/projections/open.js'
import { getSession } from '../../src/projections/queries/read-model.js'
import { TITLE_SYSTEM } from '../../src/runtime/model/title-prompt.js'
import type { Runtime } from '../../src/runtime/runtime.js'
import { clean } from '../../src/runtime/titles.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/**
 * After a session's first exchange a small tool-less call proposes a title,
 * recorded as its own task (title.started → session.renamed by the runtime,
 * or title.failed); it never affects the run, never overwrites a title the
 * user set, and can be switched off.
 */

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
}
const says = (t: string): LanguageModelV3StreamPart[] => [
  { type: 'text-start', id: 't' },
  { type: 'text-delta', id: 't', delta: t },
  { type: 'text-end', id: 't' },
  { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
]

interface World {
  runtime: Runtime
  store: ReturnType<typeof openStore>
  model: MockLanguageModelV3
  session: string
}
let world: World | undefined
afterEach(async () => {
  await world?.runtime.stop()
  world?.store.close()
  world = undefined
})

function setup(doStream: MockLanguageModelV3['doStream'] | LanguageModelV3StreamPart[][], titles = true): World {
  const model = new MockLanguageModelV3({
    doStream: Array.isArray(doStream) ? doStream.map((s) => ({ stream: convertArrayToReadableStream(s) })) : doStream,
  })
  const h = harness({ model, tools: [], titles })
  return { runtime: h.runtime, store: h.store, model, session: h.session() }
}

/** The session's events once every title call has ended (stop drains them). */
async function settled(w: World): Promise<StoredEvent[]> {
  await w.runtime.idle(w.session)
  await w.runtime.stop()
  return w.store.readSession(w.session)
}

describe('titles', () => {
  it('the first exchange gets a title from a tool-less call, recorded as a task by the runtime', async () => {
    world = setup([says('The login fails because the token expired.'), says('"Fixing the expired login token."')])
    await world.runtime.submit(world.session, { parts: [{ type: 'text', text: 'why does login fail?' }] })
    const events = await settled(world)
    const task = events.filter((e) => e.type.startsWith('title.') || e.type === 'session.renamed')
    expect(task.map((e) => [e.type, e.data, e.meta.actor])).toEqual([
      ['title.started', { titleId: expect.stringMatching(/^ttl_/), model: 'mock:model' }, 'runtime'],
      [
        'session.renamed',
        {
          title: 'Fixing the expired login token',
          titleId: task[0]?.data && (task[0].data as { titleId: string }).titleId,
        },
        'runtime',
      ],
    ])
    // after the run ended: the run itself is untouched
    const finished = events.findIndex((e) => e.type === 'run.finished')
    expect(events.findIndex((e) => e.type === 'title.started')).toBeGreaterThan(finished)
    const call = world.model.doStreamCalls[1]
    expect(call?.tools ?? []).toEqual([])
    expect(call?.prompt[0]).toEqual({ role: 'system', content: TITLE_SYSTEM })
    expect(JSON.stringify(call?.prompt[1])).toContain('why does login fail?')
    expect(getSession(world.store, world.session)?.title).toBe('Fixing the expired login token')
  })

  it('a failing title call is recorded and changes nothing else', async () => {
    let calls = 0
    world = setup(async () => {
      if (calls++ === 0) return { stream: convertArrayToReadableStream(says('Hi.')) }
      throw new Error('title model down')
    })
    await world.runtime.submit(world.session, { parts: [{ type: 'text', text: 'hello' }] })
    const events = await settled(world)
    expect(events.find((e) => e.type === 'run.finished')?.data).toMatchObject({ outcome: 'idle' })
    expect(events.at(-1)).toMatchObject({
      type: 'title.failed',
      data: { error: expect.stringContaining('title model down') },
    })
    expect(getSession(world.store, world.session)?.title).toBe('New session')
  })

  it('never overwrites a title the user set while the call ran', async () => {
    let release: () => void = () => {}
    const held = new Promise<void>((r) => {
      release = r
    })
    let calls = 0
    const w = setup(async () => {
      if (calls++ === 0) return { stream: convertArrayToReadableStream(says('Hi.')) }
      await held
      return { stream: convertArrayToReadableStream(says('A generated title')) }
    })
    world = w
    w.store.onCommit((events) => {
      if (!events.some((e) => e.type === 'title.started')) return
      setImmediate(async () => {
        await execute(sqlitePorts(w.store), w.session, () => [{ type: 'session.renamed', data: { title: 'Mine' } }], {
          meta: { actor: 'user' },
        })
        release()
      })
    })
    await w.runtime.submit(w.session, { parts: [{ type: 'text', text: 'hello' }] })
    const events = await settled(w)
    expect(events.at(-1)).toMatchObject({ type: 'title.failed', data: { error: 'the session was renamed meanwhile' } })
    expect(getSession(w.store, w.session)?.title).toBe('Mine')
  })

  it('is asked once: a second exchange makes no title call; and none when switched off', async () => {
    world = setup([says('one'), says('Title one'), says('two')])
    await world.runtime.submit(world.session, { parts: [{ type: 'text', text: 'first' }] })
    await world.runtime.idle(world.session)
    await world.runtime.submit(world.session, { parts: [{ type: 'text', text: 'second' }] })
    const events = await settled(world)
    expect(events.filter((e) => e.type === 'title.started')).toHaveLength(1)
    expect(world.model.doStreamCalls).toHaveLength(3)

    const off = setup([says('one')], false)
    await off.runtime.submit(off.session, { parts: [{ type: 'text', text: 'first' }] })
    const none = await settled(off)
    off.store.close()
    expect(none.some((e) => e.type.startsWith('title.'))).toBe(false)
    expect(off.model.doStreamCalls).toHaveLength(1)
  })

  it.each([
    ['"Quoted title."', 'Quoted title'],
    ['Title: Debugging the parser\nmore text', 'Debugging the parser'],
    ['  **Bold heading**  ', 'Bold heading'],
    ['', ''],
  ])('cleans %j to %j', (raw, title) => {
    expect(clean(raw)).toBe(title)
  })
})
