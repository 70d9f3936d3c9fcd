import type { Tool } from '../tool.js'
import type { McpServerConfig } from './config.js'
import { connectMcpServer, type McpServerHandle, type McpServerOptions, type McpServerStatus } from './server.js'

export interface McpManager {
  /** connects every configured server in parallel; never rejects (failures are statuses) */
  start(): Promise<void>
  /** the tools of every connected server, now (a crashed server's tools are gone) */
  tools(): readonly Tool[]
  status(): McpServerStatus[]
  /** server instructions for the system prompt */
  instructions(): { server: string; text: string }[]
  close(): Promise<void>
}

/** The configured MCP servers as one tool source for the registry. */
export function createMcpManager(servers: readonly McpServerConfig[], opts: McpServerOptions = {}): McpManager {
  let handles: McpServerHandle[] = []
  const pending = new Map<string, McpServerStatus>()
  return {
    async start() {
      handles = await Promise.all(
        servers.map((s) =>
          connectMcpServer(s, {
            ...opts,
            onStatus: (st) => {
              pending.set(st.name, st)
              opts.onStatus?.(st)
            },
          }),
        ),
      )
    },
    tools: () => handles.flatMap((h) => h.tools()),
    status: () => (handles.length ? handles.map((h) => h.status()) : [...pending.values()]),
    instructions: () =>
      handles.flatMap((h) => {
        const text = h.instructions()
        return text ? [{ server: h.name, text }] : []
      }),
    async close() {
      await Promise.all(handles.map((h) => h.close()))
    },
  }
}
