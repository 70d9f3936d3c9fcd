/** A small argv parser: positionals, `--flag`, `--key value` and `--key=value`. */
export interface Args {
  readonly positionals: string[]
  readonly flags: Map<string, string | true>
}

/** Flags that never take a value (so `--follow <id>` does not eat the id). */
const BOOLEAN = new Set(['follow', 'archived', 'help', 'json', 'force', 'yes', 'no-wait', 'all'])

export function parseArgs(argv: readonly string[]): Args {
  const positionals: string[] = []
  const flags = new Map<string, string | true>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1))
      break
    }
    if (!arg.startsWith('--')) {
      positionals.push(arg)
      continue
    }
    const eq = arg.indexOf('=')
    const name = arg.slice(2, eq < 0 ? undefined : eq)
    if (eq >= 0) flags.set(name, arg.slice(eq + 1))
    else if (BOOLEAN.has(name) || i + 1 >= argv.length || (argv[i + 1] as string).startsWith('--'))
      flags.set(name, true)
    else flags.set(name, argv[++i] as string)
  }
  return { positionals, flags }
}

export function flag(args: Args, name: string): string | undefined {
  const v = args.flags.get(name)
  return typeof v === 'string' ? v : undefined
}

export function intFlag(args: Args, name: string): number | undefined {
  const v = flag(args, name)
  if (v === undefined) return undefined
  const n = Number(v)
  if (!Number.isSafeInteger(n) || n < 0) throw new UsageError(`--${name} must be a non-negative integer`)
  return n
}

export class UsageError extends Error {
  override readonly name = 'UsageError'
  /** the command it is about, when the message is not already about the one run */
  constructor(
    message: string,
    readonly command?: string,
  ) {
    super(message)
  }
}
