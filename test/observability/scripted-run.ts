import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { expect } from 'vitest'
import type { ChronicleConfig } from '../../src/config.js'
import { type Client, type Frame, startServer, type TestServer } from '../http/helpers.js'

/**
 * One scripted session for the observability specs: a bash call that asks
 * for permission, answered once, then a text answer — two model calls, one
 * tool call, one permission wait. Priced so the cost is known.
 */

export const script = {
  chunkSize: 64,
  steps: [
    {
      when: { afterToolResult: false },
      toolCalls: [{ id: 'call_1', name: 'bash', input: { command: 'echo from-bash', description: 'say hi' } }],
      usage: { input: 10, output: 5 },
    },
    { when: { afterToolResult: true }, text: 'The command printed from-bash.', usage: { input: 20, output: 7 } },
  ],
}

/** USD per million tokens: step 1 costs 10·1000/1e6 + 5·2000/1e6 = 0.02, step 2 20·1000/1e6 + 7·2000/1e6 = 0.034 */
export const PRICES = { inputPrice: 1000, outputPrice: 2000 }

export type ScriptedServer = TestServer & { readonly file: string }

export async function serverWithScript(config: Partial<ChronicleConfig> = {}): Promise<ScriptedServer> {
  const file = join(mkdtempSync(join(tmpdir(), 'chronicle-script-')), 'script.json')
  writeFileSync(file, JSON.stringify(script))
  const server = await startServer(
    { CHRONICLE_MODEL: `scripted:${file}`, CHRONICLE_LOG_LEVEL: 'warn' },
    { config: { models: { [`scripted:${file}`]: PRICES }, ...config } },
  )
  return Object.assign(server, { file })
}

const typeOf = (f: Frame) => (f.event as { type?: string } | undefined)?.type

/** Creates a session and prompts it until its bash call asks; `between` runs while it waits; then answers once. */
export async function scriptedRun(
  server: TestServer,
  client: Client,
  between: (session: string) => Promise<void> = async () => {},
): Promise<{ session: string; events: { type: string; data: Record<string, unknown> }[] }> {
  const created = await client.call('session.create', { directory: server.dir })
  const session = (created.result as { session: { id: string } }).session.id
  await client.call('subscribe', { sessions: [session], after: 0 })
  await client.call('input.submit', { session, inputId: 'in_1', parts: [{ type: 'text', text: 'run echo' }] })
  const requested = await client.wait((f) => f.type === 'event' && typeOf(f) === 'permission.requested')
  const requestId = (requested.event as { data: { requestId: string } }).data.requestId
  await between(session)
  expect((await client.call('permission.reply', { session, requestId, reply: 'once' })).result).toEqual({})
  await client.wait((f) => f.type === 'event' && typeOf(f) === 'run.finished')
  const events = client.events().map((f) => f.event as { type: string; data: Record<string, unknown> })
  return { session, events }
}
