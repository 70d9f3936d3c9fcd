import { afterEach, describe, expect, it } from 'vitest'
import { type SubmitContext, submitInput } from '../../src/commands/input.js'
import { sequentialIds } from '../../src/events/ids.js'
import { Fence } from '../../src/events/postgres/fence.js'
import { openPostgresStore } from '../../src/projections/postgres/open.js'
import { postgresPorts } from '../../src/projections/store-ports.js'
import { InputIndex } from '../../src/runtime/inbox/input-index.js'
import { usePostgres } from '../support/use-postgres.js'

/**
 * An input taken by a node that does not own the session, while the owner's run appends to it all the time
 * (a stream of deltas): the taking node decides on the version it read, the owner has appended since, and the
 * command is decided again — until it lands. Found by the cluster harness (npm run test:cluster): five quick
 * attempts all lost the race to a busy stream, and the client got VERSION_CONFLICT for a plain input.
 */
const server = usePostgres()

describe('an input at another node while the owner streams', () => {
  const closing: (() => Promise<void>)[] = []
  afterEach(async () => {
    for (const close of closing.splice(0)) await close()
  })

  const node = async (url: string, name: string) => {
    const log = await openPostgresStore(url, { fence: new Fence(name) })
    const ports = postgresPorts(log)
    const index = new InputIndex(log)
    closing.push(async () => {
      index.close()
      await log.close()
    })
    const context: SubmitContext = {
      ids: sequentialIds(),
      prior: (sessionId, inputId, fresh) => index.find(sessionId, inputId, fresh),
      agents: new Set(['build']),
      validateModel: () => {},
    }
    return {
      log,
      submit: (sessionId: string, inputId: string) =>
        submitInput(ports, sessionId, { inputId, parts: [{ type: 'text', text: inputId }] }, context),
    }
  }

  it('is accepted, however busy the owner keeps the session', async () => {
    const url = await server().database()
    const owner = await node(url, 'node-a')
    const other = await node(url, 'node-b')
    await owner.log.append(
      'ses_1',
      [{ type: 'session.created', data: { directory: '/w', agent: 'build', model: null } }],
      {
        meta: { actor: 'user' },
        expectedVersion: 0,
      },
    )
    // the owner's run: an append every moment, as a model's stream is (no expected version: the run's own output)
    let streaming = true
    const stream = (async () => {
      for (let i = 0; streaming; i++) {
        await owner.log.append('ses_1', [{ type: 'session.renamed', data: { title: `t${i}` } }], {
          meta: { actor: 'runtime' },
        })
        await new Promise((r) => setTimeout(r, 2))
      }
    })()
    try {
      for (let i = 0; i < 20; i++) {
        const accepted = await other.submit('ses_1', `in_${i}`)
        expect(accepted.duplicate).toBe(false)
      }
    } finally {
      streaming = false
      await stream
    }
    const inputs = await owner.log.readSessionOfType('ses_1', 'input.accepted')
    expect(inputs).toHaveLength(20)
  })
})
