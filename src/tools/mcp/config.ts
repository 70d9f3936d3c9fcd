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
      /** how Chronicle signs in (docs/TOOLS.md); `false`: never, a 401 is a failure */
      readonly oauth?: McpOAuthConfig | false
    }

/**
 * Sign-in settings of one remote server. Without any, Chronicle signs in the
 * way the server's metadata allows: a client metadata URL (CIMD) when one is
 * configured and the server takes it, else dynamic registration.
 */
export interface McpOAuthConfig {
  /** pre-registered client; without it Chronicle registers itself */
  readonly clientId?: string
  readonly clientSecret?: string
  /** asked for when neither the server's challenge nor its metadata name scopes */
  readonly scope?: string
  /** an https URL of Chronicle's client metadata document, used as client_id where supported */
  readonly clientMetadataUrl?: string
  /** `client_credentials`: a machine client, no browser (needs clientId and clientSecret or privateKey) */
  readonly grant?: 'authorization_code' | 'client_credentials'
  /** PEM key for private_key_jwt client authentication (client_credentials only) */
  readonly privateKey?: string
  readonly signingAlgorithm?: string
}

const strings = z.record(z.string(), z.string())
const OAuth = z.union([
  z.literal(false),
  z
    .strictObject({
      clientId: z.string().min(1).optional(),
      clientSecret: z.string().min(1).optional(),
      scope: z.string().min(1).optional(),
      clientMetadataUrl: z.url({ protocol: /^https$/, error: 'clientMetadataUrl must be an https URL' }).optional(),
      grant: z.enum(['authorization_code', 'client_credentials']).optional(),
      privateKey: z.string().min(1).optional(),
      signingAlgorithm: z.string().min(1).optional(),
    })
    .refine((o) => !o.clientSecret || o.clientId, { message: 'oauth.clientSecret needs oauth.clientId' })
    .refine((o) => o.grant !== 'client_credentials' || (o.clientId && (o.clientSecret || o.privateKey)), {
      message: 'oauth.grant "client_credentials" needs oauth.clientId and oauth.clientSecret or oauth.privateKey',
    })
    .refine((o) => !o.privateKey || o.grant === 'client_credentials', {
      message: 'oauth.privateKey is only used with oauth.grant "client_credentials"',
    }),
])
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
  oauth: OAuth.optional(),
})
const Desktop = z.union([
  z.object({
    command: z.string().min(1),
    args: z.array(z.string()).optional(),
    env: strings.optional(),
    sandbox: z.boolean().optional(),
  }),
  z.object({ url: z.url(), headers: strings.optional(), oauth: OAuth.optional() }),
])

export const McpConfigFile = z.object({
  mcp: z.record(z.string(), z.discriminatedUnion('type', [Local, Remote])).optional(),
  mcpServers: z.record(z.string(), Desktop).optional(),
})

/** Both shapes → one list; disabled servers left out; a name configured twice is an error. */
export function parseMcpConfig(input: unknown): McpServerConfig[] {
  const parsed = McpConfigFile.safeParse(input)
  if (!parsed.success)
    throw new Error(parsed.error.issues.map((i) => `${i.path.join('.') || 'MCP config'}: ${i.message}`).join('; '))
  const file = parsed.data
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
        : {
            name,
            type: 'remote',
            url: s.url,
            headers: s.headers ?? {},
            ...timeout,
            ...(s.oauth !== undefined && { oauth: s.oauth }),
          },
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
        : {
            name,
            type: 'remote',
            url: s.url,
            headers: s.headers ?? {},
            ...(s.oauth !== undefined && { oauth: s.oauth }),
          },
    )
  }
  return out
}

/** `<server>_<tool>` with every character outside [a-zA-Z0-9_-] replaced by `_`. */
export function mcpToolName(server: string, tool: string): string {
  const clean = (s: string) => s.replace(/[^a-zA-Z0-9_-]/g, '_')
  return `${clean(server)}_${clean(tool)}`
}
