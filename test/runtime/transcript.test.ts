import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { apply, evolve } from '../../src/projections/fold/evolve.js'
import { emptyView } from '../../src/projections/fold/model.js'
import { toChatMessages } from '../../src/runtime/loop/chat-messages.js'
import { createScriptedModel } from '../../src/runtime/model/scripted-model.js'
import { chainOf, Transcript } from '../../src/runtime/loop/transcript.js'
import { harness, text, type Harness } from './helpers.js'

/**
 * The runtime's maintained transcript must always equal the reference
 * conversion of the read model, and every step's contextDigest must be
 * reproducible from the log alone (time travel + the reference path).
 */
describe('transcript', () => {
  let h: Harness
  afterEach(() => h.close())

  async function conversation(): Promise<string> {
    const model = createScriptedModel({
      steps: [
        {
          when: { turn: 0, afterToolResult: false },
          text: 'let me look',
          toolCalls: [
            { id: 'a', name: 'lookup', input: { query: 'one' } },
            { id: 'b', name: 'nope', input: {} },
          ],
        },
        { when: { turn: 0, afterToolResult: true }, reasoning: 'hmm', text: 'found it' },
        { when: { turn: 1, afterToolResult: false }, toolCalls: [{ id: 'c', name: 'lookup', input: { query: 7 } }] },
        { when: { turn: 1, afterToolResult: true }, text: 'done' },
      ],
    })
    h = harness({ model })
    const id = h.session()
    await h.runtime.submit(id, { parts: text('first') })
    await h.runtime.idle(id)
    writeFileSync(join(h.directory, 'notes.txt'), 'a note\n')
    await h.runtime.submit(id, {
      parts: [
        { type: 'text', text: 'second' },
        { type: 'file', path: 'notes.txt' },
      ],
    })
    await h.runtime.idle(id)
    return id
  }

  it('equals the reference conversion after every event of a real session', async () => {
    const id = await conversation()
    const view = emptyView()
    let transcript: Transcript | undefined
    for (const event of h.events(id)) {
      const changes = evolve(view, event)
      apply(view, changes)
      const read = (hash: string) => h.store.blobs.get(hash)
      transcript ??= new Transcript(view, read)
      if (event.type !== 'session.created') transcript.apply(changes)
      const expected = toChatMessages(view, { accepts: ['image', 'pdf'], read })
      const got = transcript.chat()
      expect(got.messages).toEqual(expected)
      expect(got.chain).toBe(chainOf(expected))
    }
  })

  it('every step.started digest is reproduced by compiling the context at the event before it', async () => {
    const id = await conversation()
    const steps = h.events(id).filter((e) => e.type === 'step.started')
    expect(steps).toHaveLength(4)
    for (const step of steps) {
      const context = await h.runtime.context(id, step.seq - 1)
      expect(context.digest).toBe((step.data as { contextDigest: string }).contextDigest)
    }
  })
})
