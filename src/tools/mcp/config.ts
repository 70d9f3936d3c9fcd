import { z } from 'zod'

/**
 * MCP servers from configuration. Two shapes are accepted so users can paste
 * what they already have: OpenCode's `{mcp: {name: {type: 'local', command:
 * [...], environment}}}` / `{type: 'remote', url, headers}`, and the Claude
 * Desktop / Cursor shape `{mcpServers: {name: {command, args, env}}}` (or
 * `{url, headers}`). Both become one list of McpServerConfig.
 */
export type McpServerConfig =
  | {
      readonly name: string
      readonly type: 'local'
      readonly command: readonly string[]
      readonly environment: Readonly<Record<string, string>>
      readonly timeout?: number
      /** run the server in the same OS sandbox as bash (docs/SECURITY.md) */
      readonly sandbox?: boolean
    }
  | {
      readonly name: string
      readonly type: 'remote'
      readonly url: string
      readonly headers: Readonly<Record<string, string>>
      readonly timeout?: number
    }

const strings = z.record(z.string(), z.string())
const Local = z.object({
  type: z.literal('local'),
  command: z.array(z.string().min(1)).min(1),
  environment: strings.optional(),
  enabled: z.boolean().optional(),
  timeout: z.number().int().positive().optional(),
  sandbox: z.boolean().optional(),
})
const Remote = z.object({
  type: z.literal('remote'),
  url: z.url(),
  headers: strings.optional(),
  enabled: z.boolean().optional(),
  timeout: z.number().int().positive().optional(),
})
const Desktop = z.union([
  z.object({
    command: z.string().min(1),
    args: z.array(z.string()).optional(),
    env: strings.optional(),
    sandbox: z.boolean().optional(),
  }),
  z.object({ url: z.url(), headers: strings.optional() }),
])

export const McpConfigFile = z.object({
  mcp: z.record(z.string(), z.discriminatedUnion('type', [Local, Remote])).optional(),
  mcpServers: z.record(z.string(), Desktop).optional(),
})

/** Both shapes → one list; disabled servers left out; a name configured twice is an error. */
export function parseMcpConfig(input: unknown): McpServerConfig[] {
  const file = McpConfigFile.parse(input)
  const out: McpServerConfig[] = []
  for (const [name, s] of Object.entries(file.mcp ?? {})) {
    if (s.enabled === false) continue
    const timeout = s.timeout !== undefined ? { timeout: s.timeout } : {}
    out.push(
      s.type === 'local'
        ? {
            name,
            type: 'local',
            command: s.command,
            environment: s.environment ?? {},
            ...timeout,
            ...(s.sandbox && { sandbox: true }),
          }
        : { name, type: 'remote', url: s.url, headers: s.headers ?? {}, ...timeout },
    )
  }
  for (const [name, s] of Object.entries(file.mcpServers ?? {})) {
    if (out.some((o) => o.name === name))
      throw new Error(`MCP server "${name}" is configured twice (mcp and mcpServers)`)
    out.push(
      'command' in s
        ? {
            name,
            type: 'local',
            command: [s.command, ...(s.args ?? [])],
            environment: s.env ?? {},
            ...(s.sandbox && { sandbox: true }),
          }
        : { name, type: 'remote', url: s.url, headers: s.headers ?? {} },
    )
  }
  return out
}

/** `<server>_<tool>` with every character outside [a-zA-Z0-9_-] replaced by `_`. */
export function mcpToolName(server: string, tool: string): string {
  const clean = (s: string) => s.replace(/[^a-zA-Z0-9_-]/g, '_')
  return `${clean(server)}_${clean(tool)}`
}
