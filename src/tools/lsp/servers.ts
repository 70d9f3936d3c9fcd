import { createRequire } from 'node:module'
import { dirname, extname } from 'node:path'

/**
 * The language servers by file extension (docs/TOOLS.md "Diagnostics"). Out of the box: TypeScript and
 * JavaScript through `typescript-language-server`, Python through `pyright` — each only when its npm
 * package is installed beside Chronicle. Binaries are resolved from Chronicle's own installation or the
 * user's config, never from the session directory: a workspace's node_modules cannot choose what runs
 * (typescript-language-server is also told which tsserver to use, Chronicle's own).
 */

export interface LspServerSpec {
  readonly name: string
  /** lower-case, with the dot */
  readonly extensions: readonly string[]
  /** the program and its arguments (stdio) */
  readonly command: readonly string[]
  readonly initializationOptions?: Record<string, unknown>
  /**
   * How a change's diagnostics are had: `push`, the server publishes them when it is ready (the
   * default, any LSP server); `tsserver`, asked of typescript-language-server's tsserver right after
   * the change (its `typescript.tsserverRequest` command), without the pause of 200–800 ms the server
   * waits after each change before it checks and publishes by itself.
   */
  readonly diagnostics?: 'push' | 'tsserver'
  /**
   * A `tsserver` server's own installation, which does not change while it runs: tsserver is told not to watch it
   * (diagnostics.ts). It watches the node_modules that holds its lib files recursively, one watcher per directory
   * (Linux has no recursive watch) — 0.3–0.5 s of a cold start for Chronicle's own node_modules.
   */
  readonly unwatched?: readonly string[]
  languageId(path: string): string
}

/** A server from the user's config: `lsp.servers.<name> = {extensions, command}`. */
export interface ConfiguredServer {
  readonly extensions: readonly string[]
  readonly command: readonly string[]
}

const require = createRequire(import.meta.url)

function resolved(id: string): string | undefined {
  try {
    return require.resolve(id)
  } catch {
    return undefined
  }
}

const TS_LANGUAGES: Record<string, string> = {
  '.ts': 'typescript',
  '.mts': 'typescript',
  '.cts': 'typescript',
  '.tsx': 'typescriptreact',
  '.js': 'javascript',
  '.mjs': 'javascript',
  '.cjs': 'javascript',
  '.jsx': 'javascriptreact',
}

/**
 * Where the built-in servers are installed (the node_modules that hold them and what they load): shown read-only in
 * the sandbox, which puts its own empty /tmp and /run where an install may lie (a checkout in /tmp).
 */
export function builtinServerPaths(): string[] {
  const files = [resolved('typescript-language-server/lib/cli.mjs'), resolved('typescript/lib/tsserver.js')]
  // <node_modules>/<package>/lib/<file>
  return [...new Set(files.flatMap((file) => (file ? [dirname(dirname(dirname(file)))] : [])))]
}

/** The node_modules tsserver watches for its lib files: the outermost one on their path, as it finds it. */
function nodeModulesOf(file: string): string[] {
  const at = file.indexOf('/node_modules/')
  return at < 0 ? [] : [file.slice(0, at + '/node_modules'.length)]
}

/** The servers installed beside Chronicle. */
export function builtinServers(): LspServerSpec[] {
  const servers: LspServerSpec[] = []
  const cli = resolved('typescript-language-server/lib/cli.mjs')
  const tsserver = resolved('typescript/lib/tsserver.js')
  if (cli && tsserver) {
    servers.push({
      name: 'typescript',
      extensions: Object.keys(TS_LANGUAGES),
      command: [process.execPath, cli, '--stdio'],
      // one tsserver, not a second one for syntax (it serves editors' keystrokes; on two cores it halves a cold
      // start's CPU), and no typings fetched from npm (the sandbox has no network)
      initializationOptions: {
        tsserver: { path: tsserver, fallbackPath: tsserver, useSyntaxServer: 'never' },
        disableAutomaticTypingAcquisition: true,
      },
      diagnostics: 'tsserver',
      unwatched: nodeModulesOf(tsserver),
      languageId: (path) => TS_LANGUAGES[extname(path).toLowerCase()] ?? 'typescript',
    })
  }
  const pyright = resolved('pyright/langserver.index.js')
  if (pyright) {
    servers.push({
      name: 'pyright',
      extensions: ['.py', '.pyi'],
      command: [process.execPath, pyright, '--stdio'],
      languageId: () => 'python',
    })
  }
  return servers
}

/** The user's servers first (they win for their extensions), then the built-in ones. */
export function lspServers(configured: Readonly<Record<string, ConfiguredServer>> = {}): LspServerSpec[] {
  const own = Object.entries(configured).map(([name, s]) => ({
    name,
    extensions: s.extensions.map((e) => (e.startsWith('.') ? e : `.${e}`).toLowerCase()),
    command: [...s.command],
    languageId: (path: string) => TS_LANGUAGES[extname(path).toLowerCase()] ?? extname(path).slice(1),
  }))
  return [...own, ...builtinServers()]
}
