import { afterEach, describe, expect, it } from 'vitest'
import { z } from 'zod'
import { createScriptedModel } from '../../src/runtime/model/scripted-model.js'
import { defineTool } from '../../src/tools/tool.js'
import { decidePermission } from '../../src/commands/permission.js'
import { harness, text, type Harness } from '../runtime/helpers.js'
import { executeNow } from '../support/execute-now.js'

/**
 * Finding 6 (docs/SECURITY.md): every tool has a wall-clock budget. A tool
 * that never returns — and ignores its abort signal — still ends, as a
 * failure the model reads, and the run goes on. Time spent waiting for the
 * user's permission is not the tool's and does not count.
 */

/** Waits `ms` (asking the `slow` permission first), ignoring cancellation: the worst a tool can do. */
const stubborn = defineTool({
  id: 'stubborn',
  permission: 'slow',
  description: 'Waits.',
  parameters: z.object({ ms: z.number() }),
  budgetMs: () => 300,
  async execute(args, ctx) {
    await ctx.ask({ permission: 'slow', patterns: ['*'] })
    await new Promise((r) => setTimeout(r, args.ms))
    return { output: `waited ${args.ms} ms` }
  },
})

const call = (ms: number) =>
  createScriptedModel({
    steps: [
      { when: { afterToolResult: false }, toolCalls: [{ id: 'c1', name: 'stubborn', input: { ms } }] },
      { when: { afterToolResult: true }, text: 'ok' },
    ],
  })

describe('the wall-clock budget of a tool call', () => {
  let h: Harness
  afterEach(() => h.close())

  it('a call that outlives its budget fails, the run goes on', async () => {
    h = harness({
      model: call(60_000),
      tools: [stubborn],
      agents: [{ name: 'build', rules: [{ permission: 'slow', pattern: '*', action: 'allow' }] }],
    })
    const id = h.session()
    const started = Date.now()
    await h.runtime.submit(id, { parts: text('go') })
    await h.runtime.idle(id)
    expect(Date.now() - started).toBeLessThan(10_000)
    const failed = h.events(id).find((e) => e.type === 'tool.failed')
    expect(failed?.data).toEqual({
      partId: expect.any(String),
      error: { kind: 'failed', message: 'The stubborn call ran longer than its 300 ms budget and was stopped.' },
    })
    expect(h.events(id).at(-1)).toMatchObject({ type: 'run.finished', data: { outcome: 'idle' } })
  })

  it('time spent waiting for permission does not count', async () => {
    h = harness({ model: call(200), tools: [stubborn] }) // build asks for `slow`: someone answers after 600 ms
    const id = h.session()
    h.store.onCommit((events) => {
      for (const e of events) {
        if (e.type !== 'permission.requested') continue
        const { requestId } = e.data
        const answer = () =>
          executeNow(h.store, id, (s) => decidePermission({ type: 'reply', requestId, reply: 'once' }, s, id, h.ids), {
            meta: { actor: 'user' },
          })
        setTimeout(answer, 600)
      }
    })
    await h.runtime.submit(id, { parts: text('go') })
    await h.runtime.idle(id)
    expect(h.events(id).find((e) => e.type === 'tool.completed')?.data).toMatchObject({ output: 'waited 200 ms' })
  })
})
