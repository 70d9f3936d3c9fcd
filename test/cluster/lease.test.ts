import { z } from 'zod'
import { afterEach, describe, expect, it } from 'vitest'
import { createScriptedModel } from '../../src/runtime/model/scripted-model.js'
import { NOT_STARTED_LEASE_LAPSED } from '../../src/runtime/loop/tool-exec.js'
import { defineTool } from '../../src/tools/tool.js'
import { type Harness, harness } from '../runtime/helpers.js'

/**
 * A cluster node past its lease starts no tool (docs/CLUSTER.md "Side effects the database cannot fence"):
 * the other nodes may already think it dead and resume its runs, and a tool's effects on the world cannot be
 * fenced by the database as its appends are. The call is settled as interrupted, saying it never ran.
 */
describe('a tool start past the lease', () => {
  let h: Harness | undefined
  afterEach(async () => {
    await h?.close()
  })

  const run = async (leased: () => boolean) => {
    const started: string[] = []
    const touch = defineTool({
      id: 'touch',
      description: 'Records that it ran.',
      parameters: z.object({ name: z.string() }),
      async execute(args) {
        started.push(args.name)
        return { output: `touched ${args.name}` }
      },
    })
    const model = createScriptedModel({
      steps: [{ toolCalls: [{ id: 'c1', name: 'touch', input: { name: 'marker' } }] }, { text: 'done' }],
    })
    h = harness({ model, tools: [touch], leased })
    const id = h.session()
    await h.runtime.submit(id, { parts: [{ type: 'text', text: 'touch it' }] })
    await h.runtime.idle(id)
    const settled = h.events(id).filter((e) => e.type === 'tool.completed' || e.type === 'tool.failed')
    return { started, settled }
  }

  it('is refused: the tool never runs, and its call fails interrupted saying so', async () => {
    const { started, settled } = await run(() => false)
    expect(started).toEqual([])
    expect(settled.map((e) => [e.type, e.data])).toEqual([
      ['tool.failed', expect.objectContaining({ error: { kind: 'interrupted', message: NOT_STARTED_LEASE_LAPSED } })],
    ])
  })

  it('goes ahead while the lease runs', async () => {
    const { started, settled } = await run(() => true)
    expect(started).toEqual(['marker'])
    expect(settled.map((e) => e.type)).toEqual(['tool.completed'])
  })
})
