import { readFileSync } from 'node:fs'
import { UsageError, parseArgs } from './cli/args.js'
import { chat } from './cli/chat.js'
import { compactCommand } from './cli/compact.js'
import { ApiError } from './cli/client.js'
import { demo } from './cli/demo.js'
import { auditCommand, exportCommand, importCommand, rebuildCommand, verifyCommand } from './cli/offline.js'
import { events, forkCommand, sessions, show } from './cli/remote.js'
import { serve } from './cli/serve.js'
import { tokenCommand, whoamiCommand } from './cli/tokens.js'
import { diffCommand, filesCommand, revertCommand, unrevertCommand } from './cli/workspace.js'
import { isChronicleError } from './events/errors.js'

/** `chronicle <command>`: the server and its terminal clients. */

const USAGE = `usage: chronicle <command> [options]

  serve [--config file] [--host h] [--port p]   run the server (default 127.0.0.1:4780)
  chat [session] [--directory d] [--agent a] [--model m]
                                                interactive session over WebSocket
  sessions [--archived]                         list sessions
  show <session> [--at seq]                     transcript (at a seq: as it was then)
  events <session> [--after seq] [--follow]     the event log; --follow keeps streaming
  fork <session> --at seq [--title t] [--dir d] fork a session at an event; --dir: where the fork works
                                                (required for an imported session)
  compact <session> [--no-wait]                 summarise the session's older history now (context compaction)
  files <session> [--at seq] [--path file]      the session directory's files at a seq (or one file's content)
  diff <session> --from seq --to seq            the unified diff of the session directory between two seqs
  revert <session> --to seq [--force]           the session directory back to a seq; later messages hidden from the model
  unrevert <session> [--force]                  undo the latest revert (until the next input makes it final)
  export <session> [--out file]                 session history as JSONL
  import <file> [--force]                       import an export as new, read-only sessions (server stopped)
  rebuild [--force]                             re-project read models from the log (server stopped)
  token create --name n --role audit|operate|admin [--sessions s1,s2] [--expires 30d]
                                                a named token (admin); its secret is printed once
  token list | token revoke <tokenId>           tokens without their secrets; revoke one at once
  whoami                                        who the CLI's token speaks for
  verify [--head seq:digest]                    check the log's hash chains and compare read models with the log;
                                                exit 1 on a break or a difference. Prints the log's head digest:
                                                --head checks the log still gives one recorded earlier
  audit <session> | --all                       rebuild every model request from the log and check its digest;
                                                exit 1 on any mismatch
  demo                                          a scripted session, time travel and a fork; no API key
  version                                       the version (also --version); any command takes --help

Client commands find the server at CHRONICLE_URL (default http://127.0.0.1:4780) with the token
from CHRONICLE_TOKEN or the data directory (CHRONICLE_DATA_DIR, default $XDG_DATA_HOME/chronicle or ~/.local/share/chronicle).`

/** The flags each command takes: any other is an error (--help is every command's). */
const FLAGS: Record<string, readonly string[]> = {
  serve: ['config', 'host', 'port'],
  chat: ['directory', 'agent', 'model'],
  sessions: ['archived'],
  show: ['at'],
  events: ['after', 'follow'],
  fork: ['at', 'title', 'dir'],
  compact: ['no-wait'],
  files: ['at', 'path'],
  diff: ['from', 'to'],
  revert: ['to', 'force'],
  unrevert: ['force'],
  export: ['out'],
  import: ['force'],
  rebuild: ['force'],
  token: ['name', 'role', 'sessions', 'expires'],
  whoami: [],
  verify: ['head'],
  audit: ['all'],
  demo: [],
}

/** A command's lines of the usage text (its first line and the ones continuing it). */
function usageOf(command: string): string {
  const lines = USAGE.split('\n')
  const out: string[] = []
  let inside = false
  for (const line of lines) {
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

export interface CliIo {
  readonly write: (text: string) => void
  readonly error: (text: string) => void
}

const processIo: CliIo = {
  write: (text) => void process.stdout.write(text),
  error: (text) => void process.stderr.write(text),
}

export async function main(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const [command, ...rest] = argv
  const args = parseArgs(rest.map((a) => (a === '-h' ? '--help' : a)))
  const write = io.write
  const out = (line: string) => write(`${line}\n`)
  try {
    if (command !== undefined && Object.hasOwn(FLAGS, command)) {
      if (args.flags.has('help')) {
        out(`usage: chronicle ${usageOf(command).trimStart()}`)
        return 0
      }
      const known = FLAGS[command] as readonly string[]
      for (const name of args.flags.keys())
        if (!known.includes(name))
          throw new UsageError(
            `unknown flag --${name} for ${command}${known.length > 0 ? ` (it takes ${known.map((f) => `--${f}`).join(', ')})` : ''}`,
            command,
          )
    }
    switch (command) {
      case 'serve':
        return await serve(args, out)
      case 'chat':
        return await chat(args, { input: process.stdin, output: process.stdout })
      case 'sessions':
        return await sessions(args, out)
      case 'show':
        return await show(args, out)
      case 'events':
        return await events(args, out)
      case 'fork':
        return await forkCommand(args, out)
      case 'compact':
        return await compactCommand(args, out)
      case 'files':
        return await filesCommand(args, out, write)
      case 'diff':
        return await diffCommand(args, out, write)
      case 'revert':
        return await revertCommand(args, out)
      case 'unrevert':
        return await unrevertCommand(args, out)
      case 'export':
        return await exportCommand(args, out)
      case 'import':
        return await importCommand(args, out)
      case 'rebuild':
        return await rebuildCommand(args, out)
      case 'verify':
        return await verifyCommand(args, out)
      case 'audit':
        return await auditCommand(args, out)
      case 'token':
        return await tokenCommand(args, out)
      case 'whoami':
        return await whoamiCommand(args, out)
      case 'demo':
        return await demo(out, write)
      case 'version':
      case '--version':
      case '-v':
        out(`chronicle ${version()}`)
        return 0
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        out(USAGE)
        return command === undefined ? 2 : 0
      default:
        throw new UsageError(`unknown command ${command}; chronicle --help lists them`)
    }
  } catch (err) {
    if (err instanceof UsageError) {
      // one clear line, and the usage of the command it was about (not the whole list)
      const about = err.command ?? (command !== undefined && Object.hasOwn(FLAGS, command) ? command : undefined)
      io.error(`chronicle: ${err.message}\n${about ? `usage: chronicle ${usageOf(about).trimStart()}\n` : ''}`)
      return 2
    }
    if (err instanceof ApiError || isChronicleError(err)) {
      io.error(`chronicle: ${err.message}\n`)
      return 1
    }
    throw err
  }
}

const invoked = process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href
if (invoked || process.env.CHRONICLE_CLI === '1') {
  const code = await main(process.argv.slice(2))
  // Let stdout drain, then exit (open handles such as stdin would otherwise keep the process alive).
  process.stdout.write('', () => process.exit(code))
}
