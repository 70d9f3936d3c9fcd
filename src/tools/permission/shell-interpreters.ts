import { scanOptions } from './shell-options.js'
import type { ShellWord } from './shell-words.js'
import type { Runs } from './shell-wrappers.js'

/** Programs that are shells: `-c` takes a script, and with no script file they read one from standard input. */
const SHELLS = new Set(['sh', 'bash', 'rbash', 'zsh', 'dash', 'ksh', 'mksh', 'ash', 'fish'])

/**
 * What a command that runs text as shell code runs: shells, `eval`,
 * `watch`, `su -c`, `script -c`, `trap`, `mapfile -C`; `source`/`.`,
 * `alias` and `hash -p` run code we cannot see or change what a name runs.
 * Undefined when `name` is none of these.
 */
export function interpreterRuns(name: string, args: readonly ShellWord[]): Runs[] | undefined {
  if (SHELLS.has(name)) return shell(args)
  switch (name) {
    case 'eval':
      return args.length > 0 ? [{ kind: 'script', text: joined(args) }] : []
    case 'watch':
      return watch(args)
    case 'su':
    case 'script':
      return commandOption(args)
    case 'trap':
      return trap(args)
    case 'mapfile': // `mapfile -C 'script'` runs the script for each line it reads
    case 'readarray': {
      const script = scanOptions(args, 0, { values: 'CcdnOsu' }).values.get('C')
      return script ? [{ kind: 'script', text: script }] : []
    }
    case 'hash': // `hash -p /bin/rm ls` makes `ls` run rm
      return scanOptions(args, 0, { values: 'p' }).values.has('p') ? [{ kind: 'unknown' }] : []
    case 'source':
    case '.':
      return [{ kind: 'unknown' }]
    case 'alias': // an alias is a command name whose meaning is decided elsewhere
      return args.length > 0 ? [{ kind: 'unknown' }] : []
    default:
      return undefined
  }
}

/**
 * `bash -lc 'script'`: `c` anywhere in a flag cluster makes the first operand
 * the script (`-o opt`, `-O opt` and `--rcfile file` take a value first).
 * Without `-c`, an operand is a script file; without one (or with `-s`, or
 * a file that is standard input) the shell reads its script from standard
 * input. A file named by an expansion (`bash <(curl …)`) is unknown code.
 */
function shell(args: readonly ShellWord[]): Runs[] {
  const { operand, flags, values } = scanOptions(args, 0, {
    values: 'oO',
    long: ['rcfile', 'init-file', 'command'],
    plus: true,
  })
  const command = values.get('command') // fish --command
  if (command) return [{ kind: 'script', text: command }]
  if (flags.has('c')) return [{ kind: 'script', text: args[operand] }]
  if (flags.has('version') || flags.has('help')) return []
  const file = args[operand]
  if (!file || flags.has('s') || STDIN_FILES.test(file.text)) return [{ kind: 'stdin' }]
  return file.literal ? [] : [{ kind: 'unknown' }]
}

/** Script files that are the shell's standard input after all (`echo rm f | bash -`, `bash /dev/stdin`). */
const STDIN_FILES = /^-$|^\/dev\/(stdin|fd\/0)$|^\/proc\/(self|\d+)\/fd\/0$/

/** `watch [opts] command…` joins its words and runs them with `sh -c`, unless `-x` (exec) is given. */
function watch(args: readonly ShellWord[]): Runs[] {
  const { operand, flags } = scanOptions(args, 0, {
    values: 'nqs',
    attached: 'd',
    long: ['interval', 'equexit', 'shotsdir'],
  })
  const command = args.slice(operand)
  if (command.length === 0) return []
  if (flags.has('x') || flags.has('exec')) return [{ kind: 'command', words: command }]
  return [{ kind: 'script', text: joined(command) }]
}

/** `su user -c 'script'`, `script -c 'script' log`: the option may come anywhere; without it, an interactive shell reads standard input. */
function commandOption(args: readonly ShellWord[]): Runs[] {
  for (let i = 0; i < args.length; i++) {
    const word = args[i] as ShellWord
    const { values } = scanOptions([word, ...args.slice(i + 1, i + 2)], 0, {
      values: 'c',
      long: ['command', 'session-command'],
    })
    const script = values.get('c') ?? values.get('command') ?? values.get('session-command')
    if (script) return [{ kind: 'script', text: script }]
    if (word.literal && word.text === '--') break
  }
  return [{ kind: 'stdin' }]
}

/** `trap 'script' SIGNAL…` runs the script when the signal (or EXIT) comes. */
function trap(args: readonly ShellWord[]): Runs[] {
  const { operand } = scanOptions(args, 0, {})
  const handlers = args.slice(operand)
  const script = handlers[0]
  if (handlers.length < 2 || !script || (script.literal && (script.text === '-' || script.text === ''))) return []
  return [{ kind: 'script', text: script }]
}

/** Words joined with spaces, as `eval` and `watch` do; literal only if every word is. */
function joined(words: readonly ShellWord[]): ShellWord {
  return { text: words.map((w) => w.text).join(' '), literal: words.every((w) => w.literal), pattern: false }
}
