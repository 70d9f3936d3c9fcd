import { literalWord, type ShellWord } from './shell-words.js'

/**
 * How a program's options are written, getopt-style: which short and long
 * options take a value. Knowing that is what tells `sudo -u root rm f` (runs
 * `rm f`) from `sudo -E rm f`.
 */
export interface OptionSpec {
  /** short options that take a value, attached (`-uroot`) or as the next word (`-u root`) */
  readonly values?: string
  /** short options whose value can only be attached (`xargs -i{}`) */
  readonly attached?: string
  /** long options that take a value, `--user=root` or `--user root` */
  readonly long?: readonly string[]
  /** options may also start with `+` (a shell's `+o opt`) */
  readonly plus?: boolean
}

export interface ScannedOptions {
  /** index of the first operand; words.length when there is none */
  readonly operand: number
  /** flags given, short ones by letter and long ones by name */
  readonly flags: ReadonlySet<string>
  /** values given, by letter or long name (the last one wins) */
  readonly values: ReadonlyMap<string, ShellWord>
}

/**
 * Reads options from `words[from]` on, stopping at the first operand as the
 * programs we look at do (`+` getopt). A word that is not literal ends the
 * options: it is taken as the operand, so whatever it names stays unknown.
 */
export function scanOptions(words: readonly ShellWord[], from: number, spec: OptionSpec): ScannedOptions {
  const flags = new Set<string>()
  const values = new Map<string, ShellWord>()
  let i = from
  for (; i < words.length; i++) {
    const word = words[i] as ShellWord
    const w = word.text
    if (!word.literal || w.length < 2 || !(w.startsWith('-') || (spec.plus && w.startsWith('+')))) break
    if (w === '--') return { operand: i + 1, flags, values }
    if (w.startsWith('--')) {
      const [name, value] = splitLong(w.slice(2))
      if (value !== undefined) values.set(name, literalWord(value))
      else if (spec.long?.includes(name)) i = take(words, i, name, values)
      else flags.add(name)
      continue
    }
    for (let j = 1; j < w.length; j++) {
      const letter = w[j] as string
      const rest = w.slice(j + 1)
      if (spec.values?.includes(letter)) {
        if (rest) values.set(letter, literalWord(rest))
        else i = take(words, i, letter, values)
        break
      }
      if (spec.attached?.includes(letter)) {
        values.set(letter, literalWord(rest))
        break
      }
      flags.add(letter)
    }
  }
  return { operand: i, flags, values }
}

/** The next word as the value of `name`; returns the index of the word consumed. */
function take(words: readonly ShellWord[], i: number, name: string, values: Map<string, ShellWord>): number {
  const value = words[i + 1]
  if (value) values.set(name, value)
  return i + 1
}

function splitLong(option: string): [string, string | undefined] {
  const eq = option.indexOf('=')
  return eq < 0 ? [option, undefined] : [option.slice(0, eq), option.slice(eq + 1)]
}
