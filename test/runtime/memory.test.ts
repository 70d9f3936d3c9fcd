import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { afterAll, describe, expect, it } from 'vitest'
import { execute } from '../../src/commands/execute.js'
import { decideSession } from '../../src/commands/session.js'
import type { CacheBounds } from '../../src/events/bounded-cache.js'
import { createIdSource } from '../../src/events/ids.js'
import { openStore } from '../../src/projections/open.js'
import { createScriptedModel } from '../../src/runtime/model/scripted-model.js'
import { fixedModelResolver } from '../../src/runtime/model/providers.js'
import { createPermissionGate } from '../../src/runtime/permissions/gate.js'
import { createRuntime } from '../../src/runtime/runtime.js'
import { createToolRegistry } from '../../src/runtime/tools/registry.js'
import { resolveAgents } from '../../src/tools/agents.js'
import { createBuiltinTools } from '../../src/tools/builtin/index.js'
import { createFileTimes } from '../../src/tools/file-times.js'
import { sqlitePorts } from '../../src/projections/store-ports.js'

/**
 * A server that runs for weeks holds what is live, not what it ever served
 * (docs/ARCHITECTURE.md "Memory"). 5,000 sessions each run a turn (a read of a
 * file, then an answer) through the real runtime, store and tools; once they
 * have been idle for the configured time, the heap after a full collection is
 * back where it was after the first few hundred: an idle session costs no
 * memory but bounded cache entries.
 */

setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void
const heapAfterGc = () => {
  gc()
  gc()
  return process.memoryUsage().heapUsed
}
const MB = 2 ** 20
const IDLE_MS = 400

describe('memory over many sessions', () => {
  const dir = mkdtempSync(join(tmpdir(), 'chronicle-memory-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('an idle session costs nothing after 5,000 of them, and views stay within their bytes while held', async () => {
    writeFileSync(join(dir, 'notes.md'), `# Notes\n\n${'The log is the truth. '.repeat(60)}\n`)
    const bounds = (entries: number, bytes: number): CacheBounds => ({ entries, bytes, idleMs: IDLE_MS })
    const store = openStore(join(dir, 'chronicle.db'), { cache: bounds(1024, 4 * MB) })
    const ids = createIdSource()
    const agents = resolveAgents()
    const answer = 'They say the log is the truth, and everything else is folded from it. '.repeat(6)
    // replies by function: the scripted model then keeps no requests of its own (it keeps scripted ones for specs)
    const model = createScriptedModel({
      chunkSize: 32,
      uniqueCallIds: true,
      respond: (r) =>
        r.afterToolResult ? { text: answer } : { toolCalls: [{ name: 'read', input: { filePath: 'notes.md' } }] },
    })
    const viewBytes = 6 * MB
    const runtime = createRuntime({
      ports: sqlitePorts(store),
      ids,
      models: fixedModelResolver(model, 'scripted:memory'),
      tools: createToolRegistry({
        agents,
        tools: createBuiltinTools({
          dataDir: join(dir, 'data'),
          updateTodos: () => {},
          fileTimes: createFileTimes(bounds(4096, 2 * MB)),
        }),
      }),
      permissions: createPermissionGate({ ports: sqlitePorts(store), ids, agents }),
      agents,
      environment: () => ({ platform: 'test', date: '2026-12-03' }),
      memory: { views: bounds(512, viewBytes), inputs: bounds(256, MB) },
    })
    const turn = async (i: number) => {
      const sessionId = ids.next('ses')
      const create = { type: 'create' as const, directory: dir, agent: 'build', model: 'scripted:memory' }
      await execute(sqlitePorts(store), sessionId, (s) => decideSession(create, s, sessionId), {
        meta: { actor: 'user' },
      })
      await runtime.submit(sessionId, {
        inputId: `in_${i}`,
        parts: [{ type: 'text', text: `what do the notes say? (${i})` }],
      })
      await runtime.idle(sessionId)
    }
    const idle = async () => {
      await new Promise((r) => setTimeout(r, IDLE_MS * 4)) // past the idle time, and the runtime's sweep after it
    }
    try {
      // the first ones fill what is bounded by count alone (the store's remembered stream versions, interned ids)
      for (let i = 0; i < 1000; i++) await turn(i)
      await idle()
      const before = heapAfterGc()

      let peakViewBytes = 0
      for (let i = 1000; i < 6000; i++) {
        await turn(i)
        peakViewBytes = Math.max(peakViewBytes, runtime.held().viewBytes)
      }
      expect(runtime.held().views).toBeGreaterThan(0) // the recent ones are held while in use…
      expect(peakViewBytes).toBeLessThanOrEqual(viewBytes) // …within their bytes

      await idle()
      expect(runtime.held()).toEqual({ views: 0, viewBytes: 0, inputIndexes: 0 })
      const after = heapAfterGc()
      // 5,000 more sessions served: 400 bytes each would be 2 MB; a leaked view would be tens of KB each
      expect((after - before) / MB).toBeLessThan(2)
    } finally {
      await runtime.stop()
      store.close()
    }
  }, 180_000)
})
