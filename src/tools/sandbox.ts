import { execFile } from 'node:child_process'
import { mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type CredentialPaths, NOTHING_HIDDEN } from './credentials/credential-paths.js'
import { launcherArgv } from './net/proxy-launcher.js'
import { layerMounts } from './sandbox-mounts.js'

/**
 * The OS sandbox commands run in (docs/SECURITY.md). Permission rules are a
 * convenience; this is the boundary. With bubblewrap a command gets:
 *
 * - its own PID namespace (no view of the server's `/proc`, so not of its
 *   environment) and, unless the user's config turns it on, no network —
 *   or, with a list of hosts, its own network namespace whose one way out
 *   is a listener made inside it and handed to the call's proxy
 *   (net/call-proxy.ts, net/proxy-launcher.ts);
 * - the whole filesystem read-only, except the session directory and a
 *   private `/tmp`; `/run` (service sockets such as Docker's) is empty;
 * - Chronicle's data directory and config file hidden (an empty directory
 *   or file in their place), even inside the session directory;
 * - the user's credentials hidden the same way (`~/.ssh`, `~/.aws`, …,
 *   credentials/defaults.ts, plus `sandbox.hide`, less `sandbox.reveal`),
 *   looked up when each command starts; a session directory inside one of
 *   them is bound back over it (sandbox-mounts.ts);
 * - death with the server (`--die-with-parent`): killing bwrap ends the
 *   namespace, and every process in it, however it daemonised.
 *
 * Where bubblewrap cannot run the sandbox is `unavailable`: the server says so
 * at start and every command needs the user's approval, unless the user's own
 * config says `sandbox: "off"`.
 */

export type SandboxKind = 'bwrap' | 'unavailable' | 'off'

export interface Sandbox {
  readonly kind: SandboxKind
  /** why bubblewrap cannot run here (kind `unavailable`) */
  readonly reason?: string
  /** whether commands can reach the network */
  readonly network: boolean
  /**
   * the program and arguments that run `argv` confined to `workspace`, starting in `cwd` (argv itself when not
   * confined); `proxied`: the command's only way out is the call's proxy — it starts behind the launcher, which must
   * be spawned with an IPC channel and sends the proxy's listener over it (net/proxy-launcher.ts)
   */
  wrap(
    argv: readonly string[],
    place: { readonly workspace: string; readonly cwd: string; readonly proxied?: boolean },
  ): { file: string; args: string[] }
}

export interface SandboxOptions {
  /** let confined commands reach the network (default: no network) */
  readonly network?: boolean
  /** Chronicle's own paths to hide, whatever the config reveals: the data directory, the config file */
  readonly hidden?: readonly string[]
  /** the user's credentials to hide (default: none) */
  readonly credentials?: CredentialPaths
  /** paths to show read-only even where the sandbox puts its own (a program installed under /tmp) */
  readonly expose?: readonly string[]
  /** the bwrap binary (default: `bwrap` on the PATH) */
  readonly bwrap?: string
  /** the perl that starts the proxy's launcher quickly (default: the system's, if any; null: node alone) */
  readonly perl?: string | null
}

export function bwrapSandbox(options: SandboxOptions = {}): Sandbox {
  const bwrap = options.bwrap ?? 'bwrap'
  return {
    kind: 'bwrap',
    network: options.network ?? false,
    wrap(argv, { workspace, cwd, proxied = false }) {
      const args = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp', '--tmpfs', '/run']
      for (const path of options.expose ?? []) args.push('--ro-bind', path, path)
      const credentials = (options.credentials ?? NOTHING_HIDDEN).view(workspace).mounts
      args.push(...layerMounts(workspace, options.hidden ?? [], credentials))
      const shareNet = options.network && !proxied
      args.push('--unshare-all', ...(shareNet ? ['--share-net'] : []), '--die-with-parent', '--new-session')
      args.push('--chdir', cwd, '--', ...(proxied ? launcherArgv(argv, { perl: options.perl }) : argv))
      return { file: bwrap, args }
    },
  }
}

/** No confinement: `off` (the user's choice) or `unavailable` (every command asks). */
export function unconfined(kind: 'unavailable' | 'off', reason?: string): Sandbox {
  return {
    kind,
    network: true,
    ...(reason !== undefined && { reason }),
    wrap: (argv) => ({ file: argv[0] as string, args: argv.slice(1) }),
  }
}

/** Tries bubblewrap once (a confined `true`); `off` skips the check. */
export async function detectSandbox(mode: 'auto' | 'off', options: SandboxOptions = {}): Promise<Sandbox> {
  if (mode === 'off') return unconfined('off')
  const sandbox = bwrapSandbox(options)
  const probe = realpathSync(mkdtempSync(join(tmpdir(), 'chronicle-sandbox-probe-')))
  try {
    const { file, args } = sandbox.wrap(['/bin/sh', '-c', 'true'], { workspace: probe, cwd: probe })
    const failure = await new Promise<string | undefined>((resolve) => {
      execFile(file, args, { timeout: 10_000 }, (err, _stdout, stderr) =>
        resolve(err ? (stderr.trim() || err.message).split('\n')[0] : undefined),
      )
    })
    return failure === undefined ? sandbox : unconfined('unavailable', `bubblewrap (bwrap) cannot run here: ${failure}`)
  } finally {
    rmSync(probe, { recursive: true, force: true })
  }
}
