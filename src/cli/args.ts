import { parseArgs } from 'node:util'

/**
 * A command's arguments, parsed strictly by `node:util` `parseArgs`: an
 * unknown flag, a missing value or a value given to a boolean flag is a
 * UsageError naming it.
 */

export type OptionSpec = Readonly<Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }>>

export interface Args {
  readonly positionals: string[]
  readonly flags: ReadonlyMap<string, string | true | readonly string[]>
}

export function parseCommandArgs(command: string, argv: readonly string[], options: OptionSpec): Args {
  const spec = { ...options, help: { type: 'boolean', short: 'h' } } as const
  let parsed: ReturnType<typeof parseArgs>
  try {
    parsed = parseArgs({ args: [...argv], options: spec, strict: true, allowPositionals: true })
  } catch (err) {
    throw new UsageError(describeParseError(command, err as Error & { code?: string }, options), command)
  }
  const flags = new Map<string, string | true | readonly string[]>()
  for (const [name, value] of Object.entries(parsed.values))
    if (value !== undefined && value !== false) flags.set(name, value as string | true | string[])
  return { positionals: parsed.positionals, flags }
}

function describeParseError(command: string, err: Error & { code?: string }, options: OptionSpec): string {
  const name = /'(-[^' ]+)/.exec(err.message)?.[1] ?? ''
  const takes = Object.keys(options).map((f) => `--${f}`)
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown flag ${name} for ${command}${takes.length > 0 ? ` (it takes ${takes.join(', ')})` : ''}`
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return /argument missing/.test(err.message) ? `${name} needs a value` : `${name} takes no value`
    default:
      return err.message
  }
}

export function flag(args: Args, name: string): string | undefined {
  const v = args.flags.get(name)
  return typeof v === 'string' ? v : undefined
}

/** A repeatable flag's values, in order. */
export function listFlag(args: Args, name: string): readonly string[] {
  const v = args.flags.get(name)
  return Array.isArray(v) ? v : typeof v === 'string' ? [v] : []
}

export function intFlag(args: Args, name: string): number | undefined {
  const v = flag(args, name)
  if (v === undefined) return undefined
  const n = Number(v)
  if (!Number.isSafeInteger(n) || n < 0 || v.trim() === '')
    throw new UsageError(`--${name} must be a non-negative integer`)
  return n
}

/** A command that cannot go on, said in one line (exit 1), without the usage text. */
export class Refusal extends Error {
  override readonly name = 'Refusal'
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
