import type { ChildProcess, SpawnOptions } from 'node:child_process'
import { createFileTimes, type FileTimes } from '../file-times.js'
import type { ChildEnvOptions } from '../child-env.js'
import type { ProxyPolicy } from '../net/call-proxy.js'
import type { Connector } from '../net/connect.js'
import type { Resolver } from '../net/resolve.js'
import type { CredentialPaths } from '../credentials/credential-paths.js'
import type { Redactor } from '../redact.js'
import type { Sandbox } from '../sandbox.js'
import type { Tool } from '../tool.js'
import { createApplyPatchTool } from './apply-patch.js'
import { createBashTool } from './bash.js'
import { createEditTool } from './edit.js'
import { createGlobTool } from './glob.js'
import { createGrepTool } from './grep.js'
import { createListTool } from './list.js'
import { createMultiEditTool } from './multiedit.js'
import { createReadTool } from './read.js'
import { createTodoWriteTool, type TodoItem } from './todowrite.js'
import { createWebFetchTool, DEFAULT_WEBFETCH, type WebFetchSettings } from './webfetch.js'
import { createWebSearchTool, type WebSearchSettings } from './websearch.js'
import { createWriteTool } from './write.js'

export interface BuiltinToolDeps {
  /** saved tool outputs go under <dataDir>/tool-output */
  readonly dataDir: string
  /** roots no tool may touch, even inside a session directory (default: the data directory) */
  readonly forbidden?: readonly string[]
  /** the user's hidden credentials (docs/SECURITY.md): the file tools ask `credentials` for a path inside one */
  readonly credentials?: CredentialPaths
  /** records todo.updated for the session (the runtime appends it) */
  readonly updateTodos: (sessionId: string, items: TodoItem[]) => Promise<void> | void
  readonly fileTimes?: FileTimes
  readonly env?: NodeJS.ProcessEnv
  /** where bash runs (default unconfined: the server passes the detected sandbox) */
  readonly sandbox?: Sandbox
  /** what the user's config adds to commands' environment */
  readonly childEnv?: ChildEnvOptions
  /** the user's `sandbox.network` list: confined commands reach those hosts only, through a proxy per call */
  readonly network?: ProxyPolicy
  /** the server's secrets, kept out of saved outputs */
  readonly redactor?: Redactor
  readonly killGraceMs?: number
  readonly spawn?: (command: string, args: readonly string[], options: SpawnOptions) => ChildProcess
  /** (cluster) the node's lease file: bash's commands die when the lease runs out (src/tools/lease-watchdog.ts) */
  readonly leaseFile?: string
  /** webfetch's limits and allowed hosts (the config's `webfetch`), its ports to refuse, and its test seams */
  readonly webfetch?: {
    readonly settings?: Partial<WebFetchSettings>
    readonly ownPorts?: () => readonly number[]
    readonly resolve?: Resolver
    readonly connector?: Connector
  }
  /** websearch's provider (the config's `websearch`): no provider, no websearch tool */
  readonly websearch?: WebSearchSettings
}

/** The built-in tools, in the order models see them (the task tool belongs to the runtime). */
export function createBuiltinTools(deps: BuiltinToolDeps): Tool[] {
  const fileTimes = deps.fileTimes ?? createFileTimes()
  const forbidden = deps.forbidden ?? [deps.dataDir]
  const credentials = deps.credentials
  return [
    createBashTool({
      dataDir: deps.dataDir,
      forbidden,
      credentials,
      ...(deps.env && { env: deps.env }),
      ...(deps.sandbox && { sandbox: deps.sandbox }),
      ...(deps.childEnv && { childEnv: deps.childEnv }),
      ...(deps.network && { network: deps.network }),
      ...(deps.redactor && { redactor: deps.redactor }),
      ...(deps.leaseFile && { leaseFile: deps.leaseFile }),
      ...(deps.killGraceMs !== undefined && { killGraceMs: deps.killGraceMs }),
      ...(deps.spawn && { spawn: deps.spawn }),
    }),
    createReadTool({ dataDir: deps.dataDir, fileTimes, forbidden, credentials }),
    createGlobTool({ forbidden, credentials }),
    createGrepTool({ dataDir: deps.dataDir, forbidden, credentials }),
    createListTool({ forbidden, credentials }),
    createEditTool({ fileTimes, forbidden, credentials }),
    createWriteTool({ fileTimes, forbidden, credentials }),
    createMultiEditTool({ fileTimes, forbidden, credentials }),
    createApplyPatchTool({ fileTimes, forbidden, credentials }),
    createTodoWriteTool({ updateTodos: deps.updateTodos }),
    createWebFetchTool({
      dataDir: deps.dataDir,
      ...(deps.redactor && { redactor: deps.redactor }),
      ...deps.webfetch,
    }),
    ...(deps.websearch
      ? [
          createWebSearchTool({
            settings: deps.websearch,
            fetch: { ...DEFAULT_WEBFETCH, ...deps.webfetch?.settings },
            ...(deps.redactor && { redactor: deps.redactor }),
            ...(deps.webfetch?.resolve && { resolve: deps.webfetch.resolve }),
            ...(deps.webfetch?.connector && { connector: deps.webfetch.connector }),
            ...(deps.webfetch?.ownPorts && { ownPorts: deps.webfetch.ownPorts }),
          }),
        ]
      : []),
  ] as Tool[]
}

export type { TodoItem }
