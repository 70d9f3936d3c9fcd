import { randomUUID } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { ElicitResult } from '@modelcontextprotocol/sdk/types.js'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import type { McpElicitation } from '../../../src/tools/mcp/elicitation.js'
import type { ElicitationSchema } from '../../../src/tools/mcp/elicitation-content.js'
import { connectMcpServer, type McpServerHandle } from '../../../src/tools/mcp/server.js'
import { allowAll } from './context.js'

const schema: ElicitationSchema = {
  type: 'object',
  properties: {
    name: { type: 'string', default: 'Ada' },
    age: { type: 'integer', minimum: 0, default: 36 },
    email: { type: 'string', format: 'email' },
  },
  required: ['email'],
}

const ctx = allowAll

/**
 * A real SDK MCP server over HTTP whose tool `ask` sends `elicitation/create`
 * with `schema` and returns, as text, exactly what the client answered.
 */
async function startAskingServer(): Promise<{ url: string; capabilities: () => unknown; close(): Promise<void> }> {
  let seenCapabilities: unknown
  const transports = new Map<string, StreamableHTTPServerTransport>()
  const http: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = []
    for await (const c of req) chunks.push(c as Buffer)
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined
    const id = req.headers['mcp-session-id']
    let transport = typeof id === 'string' ? transports.get(id) : undefined
    if (!transport) {
      const mcp = new McpServer({ name: 'asker', version: '1.0.0' })
      mcp.registerTool('ask', { description: 'asks the user' }, async () => {
        seenCapabilities = mcp.server.getClientCapabilities()
        try {
          const answer = await mcp.server.elicitInput({ message: 'Who are you?', requestedSchema: schema })
          return { content: [{ type: 'text', text: JSON.stringify(answer) }] }
        } catch (err) {
          return { content: [{ type: 'text', text: `error: ${(err as Error).message}` }] }
        }
      })
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: randomUUID,
        onsessioninitialized: (sid) => void transports.set(sid, transport as StreamableHTTPServerTransport),
      })
      await mcp.connect(transport)
    }
    await transport.handleRequest(req, res, body)
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    capabilities: () => seenCapabilities,
    close: async () => {
      for (const t of transports.values()) await t.close()
      http.closeAllConnections()
      await new Promise<void>((resolve) => http.close(() => resolve()))
    },
  }
}

describe('elicitation from a remote MCP server', () => {
  let server: Awaited<ReturnType<typeof startAskingServer>>
  let handle: McpServerHandle | undefined
  beforeEach(async () => {
    server = await startAskingServer()
  })
  afterEach(async () => {
    await handle?.close()
    handle = undefined
    await server.close()
  })

  const ask = async (answer: (request: McpElicitation) => ElicitResult) => {
    const questions: McpElicitation[] = []
    handle = await connectMcpServer(
      { name: 'asker', type: 'remote', url: server.url, headers: {}, oauth: false },
      {
        connectTimeoutMs: 5000,
        onElicitation: async (request) => {
          questions.push(request)
          return answer(request)
        },
      },
    )
    const tool = handle.tools().find((t) => t.id === 'asker_ask')
    if (!tool) throw new Error(JSON.stringify(handle.status()))
    return { output: (await tool.execute({}, ctx)).output, questions }
  }

  it('reaches onElicitation with the server name, message and schema; the client declared form elicitation', async () => {
    const { questions } = await ask(() => ({ action: 'decline' }))
    expect(questions.map(({ server, message, requestedSchema }) => ({ server, message, requestedSchema }))).toEqual([
      { server: 'asker', message: 'Who are you?', requestedSchema: schema },
    ])
    expect(server.capabilities()).toEqual({ elicitation: { form: {} } })
  })

  it('an accepted answer goes back with the schema defaults applied', async () => {
    const { output } = await ask(() => ({ action: 'accept', content: { email: 'ada@example.com' } }))
    expect(JSON.parse(output)).toEqual({
      action: 'accept',
      content: { name: 'Ada', age: 36, email: 'ada@example.com' },
    })
  })

  it('decline and cancel go back as they are, without content', async () => {
    expect(JSON.parse((await ask(() => ({ action: 'decline' }))).output)).toEqual({ action: 'decline' })
    await handle?.close()
    expect(JSON.parse((await ask(() => ({ action: 'cancel', content: { email: 'x@y.z' } }))).output)).toEqual({
      action: 'cancel',
    })
  })

  it('content that does not fit the schema is never sent as an answer: the server gets an error with its code', async () => {
    const { output } = await ask(() => ({ action: 'accept', content: { email: 'not-an-email', age: -1 } }))
    // (the SDK prefixes "MCP error -32602:" once on each side)
    expect(output).toMatch(/^error: (MCP error -32602: )+ELICITATION_OUT_OF_RANGE: "age" must be at least 0$/)
  })

  it('without onElicitation the client declares no elicitation, so a server cannot ask', async () => {
    handle = await connectMcpServer(
      { name: 'asker', type: 'remote', url: server.url, headers: {}, oauth: false },
      { connectTimeoutMs: 5000 },
    )
    const tool = handle.tools().find((t) => t.id === 'asker_ask')
    const output = (await tool?.execute({}, ctx))?.output
    expect(server.capabilities()).toEqual({})
    expect(output).toBe('error: Client does not support form elicitation.')
  })
})
