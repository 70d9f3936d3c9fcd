import { type OptionSpec, scanOptions } from './shell-options.js'
import { literalWord, type ShellWord } from './shell-words.js'

/** Something a command runs besides itself. */
export type Runs =
  /** these words, as a command of their own (`sudo rm f` runs `rm f`) */
  | { readonly kind: 'command'; readonly words: readonly ShellWord[] }
  /** this text, as a shell script; undefined when it is not in the command line (`xargs sh -c`) */
  | { readonly kind: 'script'; readonly text: ShellWord | undefined }
  /** a script read from standard input (`curl … | sh`) */
  | { readonly kind: 'stdin' }
  /** code that cannot be seen from here (`source file`, an alias) */
  | { readonly kind: 'unknown' }

/**
 * A program that runs the command in its arguments, after its own options
 * and, for some, a fixed number of operands (timeout's DURATION).
 */
interface Wrapper extends OptionSpec {
  readonly operands?: number
  /** `NAME=value` words may come before the command (env, sudo) */
  readonly assignments?: boolean
  /** options whose value is itself a script (`env -S 'rm f'`) */
  readonly scripts?: readonly string[]
  /** flags that, without a command, start a shell on standard input (`sudo -s`) */
  readonly shellFlags?: string
  /** what runs when no command is given (xargs runs echo) */
  readonly otherwise?: readonly ShellWord[]
}

const WRAPPERS: Readonly<Record<string, Wrapper>> = {
  env: {
    values: 'uCSa',
    long: ['unset', 'chdir', 'split-string', 'argv0'],
    assignments: true,
    scripts: ['S', 'split-string'],
  },
  command: {}, // -v/-V only print what would run; treated as running it, conservatively
  builtin: {},
  exec: { values: 'a' },
  time: { values: 'fo', long: ['format', 'output'] }, // the bash keyword (-p) and GNU time
  nice: { values: 'n', long: ['adjustment'] },
  nohup: {},
  timeout: { values: 'sk', long: ['signal', 'kill-after'], operands: 1 },
  xargs: {
    values: 'ILnPsdEa',
    attached: 'ile',
    long: ['arg-file', 'max-args', 'max-procs', 'max-chars', 'delimiter', 'process-slot-var'],
    otherwise: [literalWord('echo')],
  },
  sudo: {
    values: 'aCcDgpRrTtUu',
    attached: 'h',
    long: [
      'auth-type',
      'close-from',
      'login-class',
      'chdir',
      'group',
      'prompt',
      'chroot',
      'role',
      'command-timeout',
      'type',
      'other-user',
      'user',
    ],
    assignments: true,
    shellFlags: 'si',
  },
  doas: { values: 'Cu', shellFlags: 's' },
  stdbuf: { values: 'ioe', long: ['input', 'output', 'error'] },
  setsid: {},
  ionice: { values: 'cnpPu', long: ['class', 'classdata', 'pid', 'pgid', 'uid'] },
  chrt: { values: 'TPD', long: ['sched-runtime', 'sched-period', 'sched-deadline'], operands: 1 },
  taskset: { operands: 1 },
  unbuffer: {},
  busybox: {},
}

/** What a wrapper runs; undefined when `name` is not a wrapper. */
export function wrapperRuns(name: string, args: readonly ShellWord[]): Runs[] | undefined {
  if (name === 'coproc') return coproc(args)
  if (name === 'flock') return flock(args)
  if (name === 'find') return find(args)
  const wrapper = WRAPPERS[name]
  return wrapper && unwrap(wrapper, args)
}

function unwrap(wrapper: Wrapper, args: readonly ShellWord[]): Runs[] {
  const { operand, flags, values } = scanOptions(args, 0, wrapper)
  const runs: Runs[] = []
  for (const option of wrapper.scripts ?? []) {
    const script = values.get(option)
    if (script) runs.push({ kind: 'script', text: script })
  }
  let start = operand + (wrapper.operands ?? 0)
  while (wrapper.assignments && start < args.length && isAssignment(args[start] as ShellWord)) {
    // `env PS4='$(rm f)' bash -x …`, `env PATH=. ls`: the value changes what runs.
    if (/^(PATH|BASH_ENV|ENV)=|\$\(|`/.test(args[start]?.text ?? '')) runs.push({ kind: 'unknown' })
    start++
  }
  if (args[start]?.text === '-' && args[start]?.literal) start++ // `env -`: an empty environment
  const command = args.slice(start)
  if (command.length > 0) runs.push({ kind: 'command', words: command })
  else if ([...(wrapper.shellFlags ?? '')].some((f) => flags.has(f))) runs.push({ kind: 'stdin' })
  else if (wrapper.otherwise) runs.push({ kind: 'command', words: wrapper.otherwise })
  return runs
}

export function isAssignment(word: ShellWord): boolean {
  return word.literal && /^[A-Za-z_][A-Za-z0-9_]*=/.test(word.text)
}

/** `coproc [NAME] command`; the grammar splits `coproc NAME { …; }` badly, so its words are taken from after the brace. */
function coproc(args: readonly ShellWord[]): Runs[] {
  const brace = args.findIndex((w) => w.literal && w.text === '{')
  const command = brace >= 0 && brace <= 1 ? args.slice(brace + 1) : args
  return command.length > 0 ? [{ kind: 'command', words: command }] : []
}

/** `flock [opts] FILE command…` or `flock [opts] FILE -c 'script'` (the script runs in a shell). */
function flock(args: readonly ShellWord[]): Runs[] {
  const { operand, values } = scanOptions(args, 0, {
    values: 'wEc',
    long: ['timeout', 'conflict-exit-code', 'command'],
  })
  const before = values.get('c') ?? values.get('command')
  if (before) return [{ kind: 'script', text: before }]
  const after = scanOptions(args, operand + 1, { values: 'c', long: ['command'] })
  const script = after.values.get('c') ?? after.values.get('command')
  if (script) return [{ kind: 'script', text: script }]
  const command = args.slice(operand + 1)
  return command.length > 0 ? [{ kind: 'command', words: command }] : []
}

const FIND_EXEC = new Set(['-exec', '-execdir', '-ok', '-okdir'])

/**
 * `find … -exec cmd {} \;` (and -execdir, -ok, -okdir) runs `cmd {}`.
 * `find PATH… -delete` deletes like `rm`, so it also counts as `rm PATH…`
 * for the rules: a deny on `rm *` then covers it.
 */
function find(args: readonly ShellWord[]): Runs[] {
  let i = 0
  while (i < args.length && /^-[HLP]+$|^-D$|^-O\d*$/.test(args[i]?.text ?? '')) i += args[i]?.text === '-D' ? 2 : 1
  const paths: ShellWord[] = []
  while (i < args.length && !/^[-(!),]/.test(args[i]?.text ?? '')) paths.push(args[i++] as ShellWord)
  const runs: Runs[] = []
  for (; i < args.length; i++) {
    const word = args[i] as ShellWord
    if (word.text === '-delete')
      runs.push({ kind: 'command', words: [literalWord('rm'), ...(paths.length ? paths : [literalWord('.')])] })
    if (!FIND_EXEC.has(word.text)) continue
    const end = args.findIndex((w, k) => k > i && (w.text === ';' || w.text === '+'))
    const command = args.slice(i + 1, end < 0 ? args.length : end)
    if (command.length > 0) runs.push({ kind: 'command', words: command })
    i = end < 0 ? args.length : end
  }
  return runs
}
