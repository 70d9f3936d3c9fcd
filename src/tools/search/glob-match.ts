import { ToolFailure } from '../tool.js'

/**
 * Glob matching without a backtracking RegExp. A glob compiles to a small
 * NFA (Thompson's construction) that runs over the path once, keeping the set
 * of live states: O(path length × glob length) for every glob, where the
 * RegExp translation of `*a*a*a*a*a*b` backtracks for minutes on a long name.
 *
 * Semantics, over forward-slash paths relative to the search root:
 *
 *   `*`         any run of characters within one segment (never `/`)
 *   `?`         one character except `/`
 *   `**`        any run of characters, `/` included; `**` followed by `/` is zero or more whole directories
 *   `[a-z_]`    one character (never `/`) in the set; `[!…]` or `[^…]` not in it; `]` first is a member
 *   `{a,b}`     alternatives, nestable, each holding any of the above
 *   anything else, an unclosed `[` or `{` and `\`, is literal
 *
 * A glob without `/` matches the base name at any depth (more precisely: a
 * suffix of the path that starts at a segment boundary, so `*.ts` matches
 * `a.ts` and `src/lib/a.ts`); a glob with `/` matches the whole path, a
 * leading `./` ignored.
 */
export type GlobMatcher = (path: string) => boolean

/** Longer globs are refused: no real one comes near, and matching cost grows with length. */
export const MAX_GLOB_LENGTH = 1000

const SLASH = 0x2f

type Test = (code: number) => boolean

interface State {
  /** states reached without consuming a character */
  readonly eps: number[]
  /** states reached by consuming one character that passes the test */
  readonly edges: { readonly test: Test; readonly to: number }[]
}

type Node =
  | { readonly kind: 'char'; readonly test: Test }
  | { readonly kind: 'star'; readonly test: Test } // a loop: zero or more characters passing the test
  | { readonly kind: 'dirs' } // `**/`: empty, or anything ending in `/`
  | { readonly kind: 'alt'; readonly branches: Node[][] }

export function compileGlob(glob: string): GlobMatcher {
  if (glob.length > MAX_GLOB_LENGTH)
    throw new ToolFailure('invalid', `The glob is longer than ${MAX_GLOB_LENGTH} characters; use a shorter pattern.`)
  const anywhere = !glob.includes('/')
  const nodes = parse(glob.startsWith('./') ? glob.slice(2) : glob)
  const states: State[] = []
  const add = () => states.push({ eps: [], edges: [] }) - 1
  const start = add()
  const accept = build(nodes, start, states, add)
  const nfa: Nfa = {
    states,
    start,
    accept,
    anywhere,
    seen: new Int32Array(states.length).fill(-1),
    stack: [],
    epoch: 0,
  }
  return (path) => run(nfa, path)
}

interface Nfa {
  readonly states: readonly State[]
  readonly start: number
  readonly accept: number
  /** a match may also start right after any `/` */
  readonly anywhere: boolean
  /** scratch, reused by every run (matching is synchronous): the step at which a state was last added */
  readonly seen: Int32Array
  readonly stack: number[]
  /** the first step number of the next run, so `seen` needs no clearing between runs */
  epoch: number
}

function parse(glob: string): Node[] {
  return parseSeq(glob, 0, glob.length)
}

/** Nodes for glob[from, to). */
function parseSeq(glob: string, from: number, to: number): Node[] {
  const nodes: Node[] = []
  for (let i = from; i < to; i++) {
    const c = glob[i] as string
    if (c === '*') {
      if (glob[i + 1] === '*' && i + 1 < to) {
        const dirs = glob[i + 2] === '/' && i + 2 < to
        nodes.push(dirs ? { kind: 'dirs' } : { kind: 'star', test: anyChar })
        i += dirs ? 2 : 1
      } else nodes.push({ kind: 'star', test: notSlash })
    } else if (c === '?') nodes.push({ kind: 'char', test: notSlash })
    else if (c === '[') {
      const cls = parseClass(glob, i, to)
      if (cls) {
        nodes.push({ kind: 'char', test: cls.test })
        i = cls.end
      } else nodes.push(literal(c))
    } else if (c === '{') {
      const close = matchingBrace(glob, i, to)
      if (close < 0) nodes.push(literal(c))
      else {
        nodes.push({ kind: 'alt', branches: splitTopLevel(glob, i + 1, close).map(([a, b]) => parseSeq(glob, a, b)) })
        i = close
      }
    } else nodes.push(literal(c))
  }
  return nodes
}

function literal(c: string): Node {
  const code = c.charCodeAt(0)
  return { kind: 'char', test: (x) => x === code }
}

const anyChar: Test = () => true
const notSlash: Test = (x) => x !== SLASH

/** `[…]` starting at `open`: its test and the index of its `]`, or undefined when unclosed. */
function parseClass(glob: string, open: number, to: number): { test: Test; end: number } | undefined {
  let i = open + 1
  const negated = glob[i] === '!' || glob[i] === '^'
  if (negated) i++
  const ranges: [number, number][] = []
  for (let first = true; i < to; i++, first = false) {
    const c = glob.charCodeAt(i)
    if (c === 0x5d && !first) {
      const test: Test = (x) => x !== SLASH && ranges.some(([lo, hi]) => x >= lo && x <= hi) !== negated
      return { test, end: i }
    }
    if (glob[i + 1] === '-' && i + 2 < to && glob[i + 2] !== ']') {
      ranges.push([c, glob.charCodeAt(i + 2)])
      i += 2
    } else ranges.push([c, c])
  }
  return undefined
}

/** The index of the `}` closing the `{` at `open` (nesting counted), or -1. */
function matchingBrace(glob: string, open: number, to: number): number {
  let depth = 0
  for (let i = open; i < to; i++) {
    if (glob[i] === '{') depth++
    else if (glob[i] === '}' && --depth === 0) return i
  }
  return -1
}

/** The [from, to) ranges between top-level commas of glob[from, to). */
function splitTopLevel(glob: string, from: number, to: number): [number, number][] {
  const parts: [number, number][] = []
  let depth = 0
  let start = from
  for (let i = from; i < to; i++) {
    if (glob[i] === '{') depth++
    else if (glob[i] === '}') depth--
    else if (glob[i] === ',' && depth === 0) {
      parts.push([start, i])
      start = i + 1
    }
  }
  parts.push([start, to])
  return parts
}

/** Adds the states for `nodes` after state `from`; returns the state reached at their end. */
function build(nodes: readonly Node[], from: number, states: State[], add: () => number): number {
  let at = from
  for (const node of nodes) {
    const here = states[at] as State
    if (node.kind === 'char') {
      const next = add()
      here.edges.push({ test: node.test, to: next })
      at = next
    } else if (node.kind === 'star') {
      const loop = add()
      here.eps.push(loop)
      ;(states[loop] as State).edges.push({ test: node.test, to: loop })
      at = loop
    } else if (node.kind === 'dirs') {
      const inside = add()
      const end = add()
      here.eps.push(end, inside)
      ;(states[inside] as State).edges.push({ test: anyChar, to: inside }, { test: (x) => x === SLASH, to: end })
      at = end
    } else {
      const end = add()
      for (const branch of node.branches) (states[build(branch, at, states, add)] as State).eps.push(end)
      at = end
    }
  }
  return at
}

/**
 * Runs the NFA over `path`, keeping the set of live states: one pass, no
 * backtracking. Each state enters the set at most once per character (it is
 * marked with the step), so a step costs O(states + edges).
 */
function run(nfa: Nfa, path: string): boolean {
  const { states, seen, stack, anywhere } = nfa
  if (nfa.epoch > 2 ** 30) {
    seen.fill(-1)
    nfa.epoch = 0
  }
  const base = nfa.epoch
  nfa.epoch += path.length + 1
  let current: number[] = []
  let next: number[] = []
  const enter = (set: number[], state: number, step: number) => {
    stack.push(state)
    while (stack.length > 0) {
      const s = stack.pop() as number
      if (seen[s] === step) continue
      seen[s] = step
      set.push(s)
      for (const e of (states[s] as State).eps) if (seen[e] !== step) stack.push(e)
    }
  }
  enter(current, nfa.start, base)
  for (let i = 0; i < path.length; i++) {
    const code = path.charCodeAt(i)
    const step = base + i + 1
    next.length = 0
    for (const s of current) {
      for (const edge of (states[s] as State).edges) if (edge.test(code)) enter(next, edge.to, step)
    }
    if (anywhere && code === SLASH) enter(next, nfa.start, step)
    if (next.length === 0) {
      if (!anywhere) return false
      // nothing alive: the only hope is a fresh start after the next `/`
      const slash = path.indexOf('/', i + 1)
      if (slash < 0) return false
      i = slash - 1
    }
    ;[current, next] = [next, current]
  }
  return seen[nfa.accept] === base + path.length
}
