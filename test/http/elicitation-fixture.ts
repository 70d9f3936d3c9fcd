import { fileURLToPath } from 'node:url'
import { z } from 'zod'
import type { Client, Frame } from './helpers.js'

/** The eliciting MCP server and the scripted model's script the elicitation specs share. */
export const ELICIT_SERVER = fileURLToPath(new URL('../tools/fixtures/elicit-server.mjs', import.meta.url))

export const elicitScript = {
  chunkSize: 64,
  uniqueCallIds: true,
  steps: [
    { when: { userContains: '#book', afterToolResult: false }, toolCalls: [{ name: 'elicit_book', input: {} }] },
    { when: { userContains: '#huge', afterToolResult: false }, toolCalls: [{ name: 'elicit_huge', input: {} }] },
    {
      when: { userContains: '#malformed', afterToolResult: false },
      toolCalls: [{ name: 'elicit_malformed', input: {} }],
    },
    { when: { userContains: '#sample', afterToolResult: false }, toolCalls: [{ name: 'elicit_sample', input: {} }] },
    { when: { afterToolResult: true }, text: 'Done.' },
  ],
}

/** MCP tools ask permission before every call: these tests are about what comes after. */
export const allowElicitTools = [{ permission: 'elicit_*', pattern: '*', action: 'allow' as const }]

const WireEvent = z.object({
  seq: z.number(),
  event: z.object({
    type: z.string(),
    data: z.record(z.string(), z.unknown()),
    meta: z.record(z.string(), z.unknown()),
  }),
})
export type WireEvent = z.infer<typeof WireEvent>

const isEvent = (types: readonly string[], after: number) => (f: Frame) => {
  if (f.type !== 'event') return false
  const e = WireEvent.parse(f)
  return types.includes(e.event.type) && e.seq > after
}

/** The next event frame of `type` (or of one of `type`) after seq `after`, looking at frames received first. */
export async function waitEvent(c: Client, type: string | readonly string[], after = 0): Promise<WireEvent> {
  return WireEvent.parse(await c.wait(isEvent(typeof type === 'string' ? [type] : type, after)))
}

/** The event frames received so far, in order. */
export function eventsOf(c: Client): WireEvent[] {
  return c.frames.filter((f) => f.type === 'event').map((f) => WireEvent.parse(f))
}
