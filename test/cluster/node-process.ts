import { mkdtempSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { type ServerProcess, startServer } from '../crash/server-process.js'

/**
 * A node of a cluster as a real server process (test/crash/server-process.ts): a data dir of its own under
 * `root`, the database at `url`, the scripted model playing `script`, bash allowed without asking unless the
 * options say otherwise (a run is never parked on a permission the test does not answer). What the cluster specs and the cluster bench start.
 */
export interface NodeOptions {
  readonly root: string
  readonly url: string
  readonly name: string
  readonly token: string
  /** a scripted model's JSON script file */
  readonly script: string
  readonly ttlMs: number
  readonly heartbeatMs: number
  /** the config's permission rules; default: bash allowed */
  readonly permission?: readonly { permission: string; pattern: string; action: 'allow' | 'ask' | 'deny' }[]
  /** more of the node's config file (chronicle.json), e.g. its MCP servers */
  readonly config?: Record<string, unknown>
  /** variables the node's commands get (the config's `sandbox.env`): the crash harness names the node to its bash */
  readonly commandEnv?: Readonly<Record<string, string>>
}

export function startNode(options: NodeOptions): Promise<ServerProcess> {
  const dataDir = mkdtempSync(join(options.root, `data-${options.name}-`))
  const permission = options.permission ?? [{ permission: 'bash', pattern: '*', action: 'allow' }]
  const sandbox = options.commandEnv && { sandbox: { env: options.commandEnv } }
  writeFileSync(join(dataDir, 'chronicle.json'), JSON.stringify({ ...options.config, permission, ...sandbox }))
  return startServer({
    CHRONICLE_DATA_DIR: dataDir,
    CHRONICLE_PORT: '0',
    CHRONICLE_HOST: '127.0.0.1',
    CHRONICLE_TOKEN: options.token,
    CHRONICLE_MODEL: `scripted:${options.script}`,
    CHRONICLE_LOG_LEVEL: 'warn',
    CHRONICLE_DATABASE_URL: options.url,
    CHRONICLE_CLUSTER_NODE: options.name,
    CHRONICLE_CLUSTER_TTL_MS: String(options.ttlMs),
    CHRONICLE_CLUSTER_HEARTBEAT_MS: String(options.heartbeatMs),
    XDG_CONFIG_HOME: join(options.root, 'config'),
  })
}
