import { readFileSync } from 'node:fs'
import { type Args, type OptionSpec, parseCommandArgs, UsageError } from './cli/args.js'
import { type Terminal, terminalOf } from './cli/terminal.js'

/**
 * `chronicle <command>`: the server and its terminal clients. Each command's
 * module is imported only when that command runs, so `--help` loads nothing
 * but this file.
 */

const USAGE = `usage: chronicle <command> [options]

  serve [--config file] [--host h] [--port p]   run the server (default 127.0.0.1:4780)
  run [prompt] [--session s | --continue] [--directory d] [--agent a] [--model m] [--format text|json]
      [--allow perm[:pattern]]… [--deny perm[:pattern]]…
                                                one prompt, headless: prints the answer (or, with --format json,
                                                the session's events as JSON lines) and exits with how the run
                                                ended. No prompt: read from stdin. A permission no --allow
                                                matches is refused (fail closed)
  chat [session] [--continue] [--directory d] [--agent a] [--model m]
                                                interactive session over WebSocket; --continue: the most recent
                                                session; a session picker when stdin is a terminal
  sessions [--archived]                         list sessions
  show <session> [--at seq]                     transcript (at a seq: as it was then)
  events <session> [--after seq] [--follow]     the event log; --follow keeps streaming
  search <query> [--json] [--limit n] [--order newest|relevance] [--archived]
                                                every session, full text: words, "phrases", prefix*, session: tool:
                                                by: type: file: before: after:, -excluded (docs/SEARCH.md); each hit
                                                with the \`show --at\` line that opens it there
  fork <session> --at seq [--title t] [--dir d] fork a session at an event; --dir: where the fork works
                                                (required for an imported session)
  compact <session> [--no-wait]                 summarise the session's older history now (context compaction)
  files <session> [--at seq] [--path file]      the session directory's files at a seq (or one file's content)
  diff <session> --from seq --to seq            the unified diff of the session directory between two seqs
  revert <session> --to seq [--force]           the session directory back to a seq; later messages hidden from the model
  unrevert <session> [--force]                  undo the latest revert (until the next input makes it final)
  export <session> [--out file] [--format jsonl|atif]
                                                session history as JSONL (lossless; import takes it), or as an
                                                Agent Trajectory Interchange Format (ATIF v1.6) document
  import <file> [--force]                       import an export as new, read-only sessions (server stopped)
  rebuild [--force]                             re-project read models from the log (server stopped)
  backup --out dir                              the running server copies its store and workspace objects into a new
                                                directory while it serves; prints the seq and head digest (admin)
  restore <backup> [--head seq:digest]          put a backup back (server stopped): checked first (integrity, chain,
                                                read models, objects; --head: the digest backup printed), the replaced
                                                store kept aside in the data directory
  token create --name n --role audit|operate|admin [--sessions s1,s2] [--expires 30d]
                                                a named token (admin); its secret is printed once
  token list | token revoke <name|tokenId>      tokens without their secrets; revoke one at once
  whoami                                        who the CLI's token speaks for
  share <session> [--role audit|operate] [--expires 7d] [--name n]
                                                a link to the session (its forks and sub-agents) for any number of
                                                visitors until it expires or is revoked; printed once
  share list [--session s] | share revoke <shareId>
                                                shares without their links; revoke one, closing its open pages
  mcp list | mcp login <server> | mcp logout <server> [--config file]
                                                MCP servers and their sign-in; login prints the authorization URL and
                                                waits for the browser (on the server's port: stop the server first);
                                                logout deletes the stored sign-in
  store copy [--to postgres://…] [--force]      copy the store into an empty PostgreSQL database (server stopped):
                                                the same seqs and head digest; the copy is verified there (--to defaults to CHRONICLE_DATABASE_URL)
  verify [--head seq:digest] [--force] [--url postgres://…]
                                                check the log's hash chains and compare read models with the log
                                                (server stopped); exit 1 on a break or a difference. Prints the
                                                log's head digest: --head checks the log still gives one recorded earlier;
                                                --url: a PostgreSQL store (after pg_restore: --head must be its head)
  audit <session> | --all                       rebuild every model request from the log and check its digest;
                                                exit 1 on any mismatch
  doctor [--config file]                        check the config, the model, the sandbox, the data directory, the store and the server
  demo                                          a scripted session, time travel and a fork; no API key
  version                                       the version (also --version, -v); any command takes --help

Client commands find the server at CHRONICLE_URL (default http://127.0.0.1:4780) with the token
from CHRONICLE_TOKEN or the data directory (CHRONICLE_DATA_DIR, default $XDG_DATA_HOME/chronicle or ~/.local/share/chronicle).
Colours follow the terminal (NO_COLOR=1 turns them off).`

const S = { type: 'string' } as const
const B = { type: 'boolean' } as const
const MANY = { type: 'string', multiple: true } as const

export interface CliIo {
  readonly stdout: Terminal
  readonly stderr: Terminal
  readonly stdin: NodeJS.ReadableStream & { isTTY?: boolean }
}

interface Command {
  readonly options: OptionSpec
  readonly run: (args: Args, io: CliIo) => Promise<number>
}

const COMMANDS: Record<string, Command> = {
  serve: {
    options: { config: S, host: S, port: S },
    run: async (a, io) => (await import('./cli/serve.js')).serve(a, io.stdout),
  },
  run: {
    options: {
      session: S,
      continue: B,
      directory: S,
      agent: S,
      model: S,
      title: S,
      format: S,
      allow: MANY,
      deny: MANY,
    },
    run: async (a, io) => (await import('./cli/run.js')).runCommand(a, io),
  },
  chat: {
    options: { continue: B, directory: S, agent: S, model: S },
    run: async (a, io) => (await import('./cli/chat.js')).chat(a, io),
  },
  sessions: {
    options: { archived: B },
    run: async (a, io) => (await import('./cli/remote.js')).sessions(a, io.stdout),
  },
  show: { options: { at: S }, run: async (a, io) => (await import('./cli/remote.js')).show(a, io.stdout) },
  search: {
    options: { json: B, limit: S, order: S, archived: B },
    run: async (a, io) => (await import('./cli/search.js')).searchCommand(a, io.stdout),
  },
  events: {
    options: { after: S, follow: B },
    run: async (a, io) => (await import('./cli/remote.js')).events(a, io.stdout),
  },
  fork: {
    options: { at: S, title: S, dir: S },
    run: async (a, io) => (await import('./cli/remote.js')).forkCommand(a, io.stdout),
  },
  compact: {
    options: { 'no-wait': B },
    run: async (a, io) => (await import('./cli/compact.js')).compactCommand(a, io.stdout),
  },
  files: {
    options: { at: S, path: S },
    run: async (a, io) => (await import('./cli/workspace.js')).filesCommand(a, io.stdout),
  },
  diff: {
    options: { from: S, to: S },
    run: async (a, io) => (await import('./cli/workspace.js')).diffCommand(a, io.stdout),
  },
  revert: {
    options: { to: S, force: B },
    run: async (a, io) => (await import('./cli/workspace.js')).revertCommand(a, io.stdout),
  },
  unrevert: {
    options: { force: B },
    run: async (a, io) => (await import('./cli/workspace.js')).unrevertCommand(a, io.stdout),
  },
  export: {
    options: { out: S, format: S },
    run: async (a, io) => (await import('./cli/offline.js')).exportCommand(a, io.stdout),
  },
  import: {
    options: { force: B },
    run: async (a, io) => (await import('./cli/offline.js')).importCommand(a, io.stdout),
  },
  rebuild: {
    options: { force: B },
    run: async (a, io) => (await import('./cli/offline.js')).rebuildCommand(a, io.stdout),
  },
  backup: { options: { out: S }, run: async (a, io) => (await import('./cli/backup.js')).backupCommand(a, io.stdout) },
  restore: {
    options: { head: S },
    run: async (a, io) => (await import('./cli/offline.js')).restoreCommand(a, io.stdout),
  },
  verify: {
    options: { head: S, force: B, url: S },
    run: async (a, io) => (await import('./cli/offline.js')).verifyCommand(a, io.stdout),
  },
  store: {
    options: { to: S, force: B },
    run: async (a, io) => (await import('./cli/offline.js')).storeCommand(a, io.stdout),
  },
  audit: { options: { all: B }, run: async (a, io) => (await import('./cli/offline.js')).auditCommand(a, io.stdout) },
  mcp: {
    options: { config: S },
    run: async (a, io) => (await import('./cli/mcp.js')).mcpCommand(a, io.stdout),
  },
  token: {
    options: { name: S, role: S, sessions: S, expires: S },
    run: async (a, io) => (await import('./cli/tokens.js')).tokenCommand(a, io.stdout),
  },
  share: {
    options: { role: S, expires: S, name: S, session: S },
    run: async (a, io) => (await import('./cli/shares.js')).shareCommand(a, io.stdout, io.stderr),
  },
  whoami: { options: {}, run: async (a, io) => (await import('./cli/tokens.js')).whoamiCommand(a, io.stdout) },
  doctor: {
    options: { config: S },
    run: async (a, io) => (await import('./cli/doctor.js')).doctor(a, io.stdout.line),
  },
  demo: { options: {}, run: async (_a, io) => (await import('./cli/demo.js')).demo(io.stdout) },
}

/** A command's lines of the usage text (its first line and the ones continuing it). */
function usageOf(command: string): string {
  const out: string[] = []
  let inside = false
  for (const line of USAGE.split('\n')) {
    if (/^ {2}\S/.test(line)) inside = line.trimStart().split(' ')[0] === command
    else if (!/^ {3,}\S/.test(line)) inside = false
    if (inside) out.push(line)
  }
  return out.join('\n')
}

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
  return pkg.version
}

const processIo = (): CliIo => ({
  stdout: terminalOf(process.stdout),
  stderr: terminalOf(process.stderr),
  stdin: process.stdin,
})

/** Errors a command reports as one line (its message) and exit 1; the rest are bugs and throw. */
function isReported(err: unknown): err is Error & { code?: string } {
  if (!(err instanceof Error)) return false
  const name = err.name
  return name === 'ApiError' || name === 'ChronicleError' || name === 'Refusal'
}

export async function main(argv: readonly string[], io: CliIo = processIo()): Promise<number> {
  const [command, ...rest] = argv
  const { stdout, stderr } = io
  const fail = (text: string) => stderr.line(`${stderr.paint('red', 'chronicle:')} ${text}`)
  try {
    switch (command) {
      case 'version':
      case '--version':
      case '-v':
        stdout.line(`chronicle ${version()}`)
        return 0
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        stdout.write(`${USAGE}\n`)
        return command === undefined ? 2 : 0
    }
    const spec = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined
    if (!spec) throw new UsageError(`unknown command ${command}; chronicle --help lists them`)
    const args = parseCommandArgs(command, rest, spec.options)
    if (args.flags.has('help')) {
      stdout.write(`usage: chronicle ${usageOf(command).trimStart()}\n`)
      return 0
    }
    return await spec.run(args, io)
  } catch (err) {
    if (err instanceof UsageError) {
      // one clear line, and the usage of the command it was about (not the whole list)
      const about = err.command ?? (command !== undefined && Object.hasOwn(COMMANDS, command) ? command : undefined)
      fail(err.message)
      if (about) stderr.write(`usage: chronicle ${usageOf(about).trimStart()}\n`)
      return 2
    }
    if (isReported(err)) {
      fail(`${err.message}${hintFor(err.code)}`)
      return 1
    }
    throw err
  }
}

function hintFor(code: string | undefined): string {
  if (code === 'UNAUTHORIZED') return ' (set CHRONICLE_TOKEN, or CHRONICLE_DATA_DIR to the server’s data directory)'
  if (code === 'UNREACHABLE') return ' (start one with `chronicle serve`, or set CHRONICLE_URL)'
  return ''
}

/**
 * A reader that stops reading (`chronicle run … | head -3`) closes the pipe:
 * the next write fails with EPIPE. That is the reader's choice, not an error,
 * so the command ends at once with status 0 and says nothing, as `git log |
 * head` does; any other error on the stream is still a bug and is thrown.
 */
function quietWhenThePipeCloses(): void {
  for (const stream of [process.stdout, process.stderr])
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE') throw err
      process.exit(0)
    })
}

const invoked = process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href
if (invoked || process.env.CHRONICLE_CLI === '1') {
  quietWhenThePipeCloses()
  const code = await main(process.argv.slice(2))
  // Let stdout drain, then exit (open handles such as stdin would otherwise keep the process alive).
  process.stdout.write('', () => process.exit(code))
}
