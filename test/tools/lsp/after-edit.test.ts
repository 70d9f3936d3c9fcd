import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { execute } from '../../../src/commands/execute.js'
import { decideSession } from '../../../src/commands/session.js'
import { sequentialIds } from '../../../src/events/ids.js'
import { openStore } from '../../../src/projections/open.js'
import { fixedModelResolver } from '../../../src/runtime/model/providers.js'
import { createPermissionGate } from '../../../src/runtime/permissions/gate.js'
import { createRuntime, type Runtime } from '../../../src/runtime/runtime.js'
import { createScriptedModel } from '../../../src/runtime/model/scripted-model.js'
import { createToolRegistry } from '../../../src/runtime/tools/registry.js'
import { resolveAgents } from '../../../src/tools/agents.js'
import { createBuiltinTools } from '../../../src/tools/builtin/index.js'
import { createDiagnostics, type DiagnosticsService } from '../../../src/tools/lsp/diagnostics.js'
import { builtinServers } from '../../../src/tools/lsp/servers.js'
import { withDiagnostics } from '../../../src/tools/lsp/with-diagnostics.js'
import { unconfined } from '../../../src/tools/sandbox.js'
import { sqlitePorts } from '../../../src/projections/store-ports.js'

/**
 * An edit that breaks the types: the model's next request carries the language server's error in the
 * call's result, and the call records it (metadata.diagnostics) — through the real runtime, the real
 * `read` (which starts the server) and `write` tools and typescript-language-server; only the model is scripted.
 */

let runtime: Runtime | undefined
let diagnostics: DiagnosticsService | undefined
let dir: string | undefined
afterEach(async () => {
  await runtime?.stop()
  diagnostics?.close()
  if (dir) rmSync(dir, { recursive: true, force: true })
})

const BROKEN = "import { add } from './math'\nexport const total: number = add(1, '2')\n"

describe('diagnostics after an edit', () => {
  it('reach the model at its next step and are recorded on the call', async () => {
    dir = realpathSync(mkdtempSync(join(tmpdir(), 'chronicle-lsp-edit-')))
    const directory = dir
    writeFileSync(join(directory, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, noEmit: true } }))
    writeFileSync(
      join(directory, 'math.ts'),
      'export function add(a: number, b: number): number {\n  return a + b\n}\n',
    )
    const store = openStore(':memory:')
    const ids = sequentialIds()
    const agents = resolveAgents([{ name: 'build', rules: [{ permission: '*', pattern: '*', action: 'allow' }] }])
    diagnostics = createDiagnostics({ servers: builtinServers(), sandbox: unconfined('off'), deadlineMs: 30_000 })
    const service = diagnostics
    const tools = createBuiltinTools({
      dataDir: mkdtempSync(join(tmpdir(), 'chronicle-lsp-data-')),
      updateTodos: () => undefined,
    })
    const model = createScriptedModel({
      steps: [
        {
          when: { afterToolResult: false },
          toolCalls: [{ id: 'c_read', name: 'read', input: { filePath: 'math.ts' } }],
        },
        {
          when: { call: 1 },
          toolCalls: [{ id: 'c_write', name: 'write', input: { filePath: 'main.ts', content: BROKEN } }],
        },
        { when: { call: 2 }, text: 'I will fix the type error.' },
      ],
    })
    runtime = createRuntime({
      ports: sqlitePorts(store),
      ids,
      models: fixedModelResolver(model, 'mock:model'),
      tools: createToolRegistry({ agents, tools: tools.map((t) => withDiagnostics(t, service)) }),
      permissions: createPermissionGate({ ports: sqlitePorts(store), ids, agents }),
      agents,
      environment: () => ({ platform: 'test', date: '2026-01-01' }),
    })
    const id = ids.next('ses')
    await execute(
      sqlitePorts(store),
      id,
      (s) => decideSession({ type: 'create', directory, agent: 'build', model: 'mock:model' }, s, id),
      {
        meta: { actor: 'user' },
      },
    )
    await runtime.submit(id, { parts: [{ type: 'text', text: 'write main.ts' }] })
    await runtime.idle(id)

    const error = "ERROR [2:37] Argument of type 'string' is not assignable to parameter of type 'number'."
    const [read, completed] = store.readSession(id).filter((e) => e.type === 'tool.completed')
    expect(read?.data).toMatchObject({ title: 'math.ts', metadata: { filePath: join(directory, 'math.ts') } })
    expect(completed?.data).toMatchObject({
      output: expect.stringContaining(`<diagnostics file="main.ts">\n${error}\n</diagnostics>`),
      metadata: {
        diagnostics: {
          files: [
            {
              path: 'main.ts',
              errors: [
                {
                  line: 2,
                  character: 37,
                  message: "Argument of type 'string' is not assignable to parameter of type 'number'.",
                  source: 'typescript',
                  code: 2345,
                },
              ],
            },
          ],
        },
      },
    })
    expect(JSON.stringify(model.calls[2]?.prompt)).toContain(JSON.stringify(error).slice(1, -1))
  }, 90_000)
})
