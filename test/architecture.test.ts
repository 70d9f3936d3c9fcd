import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join, posix, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'

/**
 * Dependencies point one way (docs/ARCHITECTURE.md):
 *
 *   events ← projections ← commands ← runtime → tools;  http uses them; nothing imports http
 *
 * This test reads every import under src/ (static, type-only, re-exports,
 * dynamic) and fails on any that points the wrong way, on any module other
 * than the model adapter reaching for the AI SDK, and on any module outside
 * events and projections reaching into the store's database (the store port:
 * a second event store must be able to take its place).
 */

interface SourceFile {
  /** repository-relative, with forward slashes: `src/events/store.ts` */
  readonly path: string
  readonly source: string
}

/** What each layer (the folder under src/) must not import. */
const FORBIDDEN: Record<string, readonly string[]> = {
  events: ['projections', 'commands', 'runtime', 'tools', 'http', 'cli', 'main', 'config'],
  projections: ['commands', 'runtime', 'tools', 'http', 'cli', 'main'],
  commands: ['runtime', 'tools', 'http', 'cli', 'main'],
  runtime: ['http', 'cli', 'main'],
  // tools act; what a session may do and what it is offered is the runtime's to read (runtime/permissions, runtime/tools)
  tools: ['projections', 'runtime', 'http', 'cli', 'main'],
  // the SDK runs in other people's programs: it may borrow the server's types, never its code
  client: ['commands', 'runtime', 'tools', 'cli', 'main', 'config'],
  // metrics and traces read the commits (and a read-model count at a scrape): they reach nothing that acts
  observability: ['commands', 'runtime', 'tools', 'http', 'cli', 'main'],
  // the page runs in a browser: the SDK, and the pure fold (evolve) and event types, nothing of the server's running parts
  web: ['commands', 'runtime', 'tools', 'http', 'cli', 'main', 'config'],
}

/** Layers that may import these others for their types only (`import type`), which leaves nothing at run time. */
const TYPES_ONLY: Record<string, readonly string[]> = { client: ['events', 'projections', 'http'] }

/** The layers that own the store's database: everything else goes through their functions. */
const STORE_OWNERS = /^src\/(events|projections)\//
/** A reach into the database: the store's connection, a statement, or SQL in a string. */
const STORE_INTERNALS = [
  /\.db\b(?!['"`])/,
  /\.reader\(/,
  /\.prepare\(/,
  /\.pragma\(/,
  /['"`]\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|PRAGMA)\s/,
]

/**
 * The composition roots — the server's (src/main.ts) and the offline
 * commands', which run with the server stopped (src/cli/offline.ts) — are
 * the only places outside the store that name a concrete one: everything
 * else is handed the store it works on (docs/ARCHITECTURE.md "The store port").
 */
const STORE_ROOTS = /^src\/(main\.ts|cli\/offline\.ts)$/
/** Opening a concrete store: SQLite's or PostgreSQL's. */
const CONCRETE_STORE = /\b(openStore|openPostgresStore)\(|\bnew EventStore\(|\b(EventStore|PostgresEventLog)\.open\(/

/**
 * Code that reads and appends through the store's ports only (docs/ARCHITECTURE.md "What the server still
 * needs to run on PostgreSQL"): it never takes SQLite's concrete `EventStore`, so it runs on either engine.
 */
const PORTED = /^src\/runtime\/workspace\//

/** Only the composition root may wire the HTTP layer in (besides http itself). */
const HTTP_IMPORTERS = /^src\/(http\/|main\.ts$|cli\.ts$|cli\/)/

/** The model adapter and the provider / scripted-model files next to it: the only users of the AI SDK. */
const AI_SDK_USERS = /^src\/runtime\/model\/[\w.-]+\.ts$/
const AI_SDK = /^(ai|@ai-sdk\/[\w.-]+)(\/.*)?$/

function importsOf(source: string): string[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '')
  const found: string[] = []
  const patterns = [
    /\b(?:import|export)\s[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g, // import x from, import type {…} from, export * from
    /\bimport\s*['"]([^'"]+)['"]/g, // import 'side-effect'
    /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g, // import('dynamic')
    /\brequire\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
  ]
  for (const pattern of patterns) for (const m of code.matchAll(pattern)) found.push(m[1] as string)
  return found
}

/** The layer of a src path: `src/events/store.ts` → events, `src/main.ts` → main, `src/cli.ts` → cli. */
function layerOf(path: string): string | undefined {
  const m = /^src\/([^/]+?)(?:\.ts)?(?:\/|$)/.exec(path)
  return m?.[1]
}

function typeOnlyImportsOf(source: string): Set<string> {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '')
  return new Set(
    [...code.matchAll(/\b(?:import|export)\s+type\s[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g)].map((m) => m[1] as string),
  )
}

function violations(files: readonly SourceFile[]): string[] {
  const out: string[] = []
  for (const file of files) {
    const from = layerOf(file.path)
    const typeOnly = typeOnlyImportsOf(file.source)
    for (const spec of importsOf(file.source)) {
      if (AI_SDK.test(spec)) {
        if (!AI_SDK_USERS.test(file.path))
          out.push(`${file.path} imports '${spec}': only the model adapter (src/runtime/model/) may use the AI SDK`)
        continue
      }
      if (!spec.startsWith('.')) continue
      const target = posix.normalize(posix.join(posix.dirname(file.path), spec)).replace(/\.jsx?$/, '.ts')
      const to = layerOf(target)
      if (!to || to === from) continue
      if (from && TYPES_ONLY[from]?.includes(to)) {
        if (!typeOnly.has(spec)) out.push(`${file.path} imports ${target}: ${from} may import ${to} for types only`)
        continue
      }
      if (from && FORBIDDEN[from]?.includes(to))
        out.push(`${file.path} imports ${target}: ${from} must not depend on ${to}`)
      else if (to === 'http' && !HTTP_IMPORTERS.test(file.path))
        out.push(`${file.path} imports ${target}: only the composition root (src/main.ts, src/cli*) may import http`)
    }
  }
  return out
}

/**
 * The rule for where the server may connect on a model's behalf stands alone (docs/SECURITY.md
 * "Server-side request forgery"): nothing under src/tools/net imports the rest of Chronicle, so a
 * network proxy for the sandbox can take it as it is.
 */
const STANDALONE = /^src\/tools\/net\//

function standaloneReaches(files: readonly SourceFile[]): string[] {
  const out: string[] = []
  for (const file of files) {
    if (!STANDALONE.test(file.path)) continue
    for (const spec of importsOf(file.source)) {
      if (!spec.startsWith('.')) continue
      const target = posix.normalize(posix.join(posix.dirname(file.path), spec)).replace(/\.jsx?$/, '.ts')
      if (!STANDALONE.test(target))
        out.push(`${file.path} imports ${target}: src/tools/net stands alone (a sandbox proxy reuses it)`)
    }
  }
  return out
}

/** Code outside events and projections that reaches into the database (comments aside). */
function storeReaches(files: readonly SourceFile[]): string[] {
  const out: string[] = []
  for (const file of files) {
    if (STORE_OWNERS.test(file.path)) continue
    const code = file.source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '')
    for (const pattern of STORE_INTERNALS) {
      const m = pattern.exec(code)
      if (m)
        out.push(
          `${file.path} reaches into the store's database (${m[0].trim()}): only src/events and src/projections may`,
        )
    }
  }
  return out
}

/** Files outside the store and the composition roots that open a concrete store. */
function storeNamers(files: readonly SourceFile[]): string[] {
  const out: string[] = []
  for (const file of files) {
    if (STORE_OWNERS.test(file.path) || STORE_ROOTS.test(file.path)) continue
    const code = file.source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '')
    const m = CONCRETE_STORE.exec(code)
    if (m) out.push(`${file.path} opens a concrete store (${m[0]}): only the composition roots may`)
  }
  return out
}

/** Ported files that name SQLite's concrete store (comments aside). */
function sqliteTakers(files: readonly SourceFile[]): string[] {
  const out: string[] = []
  for (const file of files) {
    if (!PORTED.test(file.path)) continue
    const code = file.source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '')
    if (/\bEventStore\b/.test(code))
      out.push(`${file.path} takes SQLite's EventStore: it goes through the store's ports (StorePorts)`)
  }
  return out
}

/**
 * Where objects are made per event and kept by views: the log, the read models and the loop. There an object
 * literal must not start with a spread and then add members: on Node 20 each such object gets a hidden class of
 * its own (src/events/copy.ts: copyWith, or a literal that starts with its own keys). Import and export keep
 * spreads: they copy hostile files' objects, where Object.assign would honour a "__proto__" key.
 */
const SHAPED = /^src\/(events|projections|runtime\/loop)\//
const HOSTILE_COPIES = /^src\/projections\/transfer\/(export|import-check)\.ts$/

/** Object literals that start with a spread and add members after it (`{ ...a, b }`), but option bags of conditional spreads only. */
function spreadFirst(files: readonly SourceFile[]): string[] {
  const out: string[] = []
  for (const file of files) {
    if (!SHAPED.test(file.path) || HOSTILE_COPIES.test(file.path)) continue
    const sf = ts.createSourceFile(file.path, file.source, ts.ScriptTarget.Latest, true)
    const visit = (node: ts.Node) => {
      if (
        ts.isObjectLiteralExpression(node) &&
        node.properties.length > 1 &&
        ts.isSpreadAssignment(node.properties[0] as ts.Node)
      ) {
        const optionBag = node.properties.every(
          (p) =>
            ts.isSpreadAssignment(p) &&
            ts.isParenthesizedExpression(p.expression) &&
            ts.isBinaryExpression(p.expression.expression) &&
            p.expression.expression.operatorToken.kind === ts.SyntaxKind.AmpersandAmpersandToken,
        )
        if (!optionBag) {
          const line = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1
          out.push(
            `${file.path}:${line} starts an object literal with a spread and adds to it: use copyWith (src/events/copy.ts)`,
          )
        }
      }
      ts.forEachChild(node, visit)
    }
    visit(sf)
  }
  return out
}

function sourceTree(root: string): SourceFile[] {
  const files: SourceFile[] = []
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = join(dir, entry.name)
      if (entry.isDirectory()) walk(full)
      else if (/\.(ts|tsx|mts|js|mjs)$/.test(entry.name))
        files.push({ path: relative(root, full).split('\\').join('/'), source: readFileSync(full, 'utf8') })
    }
  }
  walk(join(root, 'src'))
  return files
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..')

describe('dependency direction', () => {
  it('holds for every file under src/', () => {
    const files = sourceTree(root)
    expect(files.length).toBeGreaterThan(20)
    expect(violations(files)).toEqual([])
  })

  it('keeps the database behind events and projections', () => {
    expect(storeReaches(sourceTree(root))).toEqual([])
  })

  it('names a concrete store in the composition roots only', () => {
    expect(storeNamers(sourceTree(root))).toEqual([])
  })

  it('keeps what runs on either engine off SQLite’s concrete store', () => {
    expect(sqliteTakers(sourceTree(root))).toEqual([])
    expect(
      sqliteTakers([
        { path: 'src/runtime/workspace/x.ts', source: "import type { EventStore } from '../../events/store.js'" },
        { path: 'src/runtime/workspace/y.ts', source: '// not an EventStore\nconst ports: StorePorts = deps.ports' },
        { path: 'src/runtime/z.ts', source: 'const store: EventStore = deps.store' },
      ]),
    ).toEqual(["src/runtime/workspace/x.ts takes SQLite's EventStore: it goes through the store's ports (StorePorts)"])
  })

  it('gives the objects of the log, the read models and the loop shared hidden classes', () => {
    expect(spreadFirst(sourceTree(root))).toEqual([])
  })

  it('keeps the network address policy standalone', () => {
    expect(standaloneReaches(sourceTree(root))).toEqual([])
    expect(
      standaloneReaches([
        { path: 'src/tools/net/x.ts', source: "import { a } from './resolve.js'\nimport { z } from 'zod'" },
        { path: 'src/tools/net/y.ts', source: "import { ToolFailure } from '../tool.js'" },
        { path: 'src/tools/web/z.ts', source: "import { pinTarget } from '../net/resolve.js'" },
      ]),
    ).toEqual(['src/tools/net/y.ts imports src/tools/tool.ts: src/tools/net stands alone (a sandbox proxy reuses it)'])
  })
})

describe('the hidden-class checker', () => {
  const check = (path: string, source: string) => spreadFirst([{ path, source }])

  it('finds a spread-first literal that adds members, and only where views keep objects', () => {
    expect(check('src/projections/x.ts', 'const a = {\n  ...b,\n  c: 1,\n}')).toEqual([
      'src/projections/x.ts:1 starts an object literal with a spread and adds to it: use copyWith (src/events/copy.ts)',
    ])
    expect(check('src/runtime/loop/x.ts', 'f({ ...b, ...c })')).toHaveLength(1)
    expect(check('src/http/x.ts', 'const a = { ...b, c: 1 }')).toEqual([])
    expect(check('src/projections/transfer/export.ts', 'const a = { ...b, c: 1 }')).toEqual([])
  })

  it('lets a literal start with its own keys, a lone spread, and a bag of conditional options', () => {
    expect(check('src/events/x.ts', 'const a = { id, ...rest }; const b = { ...c }')).toEqual([])
    expect(check('src/events/x.ts', 'f({ ...(a && { a }), ...(b !== undefined && { b }) })')).toEqual([])
  })
})

describe('the import checker', () => {
  const check = (path: string, source: string) => violations([{ path, source }])

  it('finds every kind of import and ignores comments', () => {
    const source = [
      "import a from './a.js'",
      "import type { B } from '../b.js'",
      "import {\n  c,\n  d,\n} from '../c/d.js'",
      "export * from './e.js'",
      "export { f } from './f.js'",
      "import './side-effect.js'",
      "const g = await import('./g.js')",
      "// import x from './commented.js'",
      "/* import y from './block.js' */",
      "const s = 'not an import from here'",
    ].join('\n')
    expect(importsOf(source)).toEqual([
      './a.js',
      '../b.js',
      '../c/d.js',
      './e.js',
      './f.js',
      './side-effect.js',
      './g.js',
    ])
  })

  it('rejects an import against the layering', () => {
    expect(check('src/events/store.ts', "import { fold } from '../projections/fold.js'")).toEqual([
      'src/events/store.ts imports src/projections/fold.ts: events must not depend on projections',
    ])
    expect(check('src/projections/x.ts', "import type { Runtime } from '../runtime/runtime.js'")).toEqual([
      'src/projections/x.ts imports src/runtime/runtime.ts: projections must not depend on runtime',
    ])
    expect(check('src/commands/x.ts', "const t = await import('../tools/tool.js')")).toEqual([
      'src/commands/x.ts imports src/tools/tool.ts: commands must not depend on tools',
    ])
    expect(check('src/tools/builtin/x.ts', "export * from '../../runtime/loop.js'")).toEqual([
      'src/tools/builtin/x.ts imports src/runtime/loop.ts: tools must not depend on runtime',
    ])
    expect(check('src/tools/x.ts', "import { getSession } from '../projections/read-model.js'")).toEqual([
      'src/tools/x.ts imports src/projections/read-model.ts: tools must not depend on projections',
    ])
  })

  it('finds a reach into the database outside events and projections', () => {
    const reach = (path: string, source: string) => storeReaches([{ path, source }])
    expect(reach('src/runtime/x.ts', 'const s = store.db.prepare(q)')).toEqual([
      "src/runtime/x.ts reaches into the store's database (.db): only src/events and src/projections may",
      "src/runtime/x.ts reaches into the store's database (.prepare(): only src/events and src/projections may",
    ])
    expect(reach('src/tools/x.ts', "const q = 'SELECT id FROM sessions'")).toEqual([
      "src/tools/x.ts reaches into the store's database ('SELECT): only src/events and src/projections may",
    ])
    expect(reach('src/projections/x.ts', 'store.db.prepare("SELECT 1")')).toEqual([])
    expect(reach('src/cli/x.ts', "const file = 'chronicle.db'\n// store.db in a comment")).toEqual([])
    expect(reach('src/http/x.ts', 'const db = store.reader(id)')).toEqual([
      "src/http/x.ts reaches into the store's database (.reader(): only src/events and src/projections may",
    ])
  })

  it('finds a store opened outside the composition roots', () => {
    const named = (path: string, source: string) => storeNamers([{ path, source }])
    expect(named('src/runtime/x.ts', "const s = openStore('x.db')")).toEqual([
      'src/runtime/x.ts opens a concrete store (openStore(): only the composition roots may',
    ])
    expect(named('src/http/x.ts', 'await PostgresEventLog.open(url)')).toEqual([
      'src/http/x.ts opens a concrete store (PostgresEventLog.open(): only the composition roots may',
    ])
    expect(named('src/main.ts', "const s = openStore('x.db')")).toEqual([])
    expect(named('src/projections/open.ts', 'return EventStore.open(path)')).toEqual([])
    expect(named('src/runtime/x.ts', '// openStore(path) in a comment\nconst store: EventStore = deps.store')).toEqual(
      [],
    )
  })

  it('lets the SDK borrow the server’s types but none of its code', () => {
    expect(check('src/client/x.ts', "import type { Params } from '../http/api.js'")).toEqual([])
    expect(check('src/client/x.ts', "import { Params } from '../http/api.js'")).toEqual([
      'src/client/x.ts imports src/http/api.ts: client may import http for types only',
    ])
    expect(check('src/client/x.ts', "import { loadConfig } from '../config.js'")).toEqual([
      'src/client/x.ts imports src/config.ts: client must not depend on config',
    ])
  })

  it('lets only the composition root import http', () => {
    expect(check('src/runtime/loop.ts', "import { buildApp } from '../http/app.js'")).toEqual([
      'src/runtime/loop.ts imports src/http/app.ts: runtime must not depend on http',
    ])
    expect(check('src/config.ts', "import { x } from './http/deps.js'")).toEqual([
      'src/config.ts imports src/http/deps.ts: only the composition root (src/main.ts, src/cli*) may import http',
    ])
    expect(check('src/main.ts', "import { buildApp } from './http/app.js'")).toEqual([])
    expect(check('src/cli.ts', "import { buildApp } from './http/app.js'")).toEqual([])
    expect(check('src/cli/serve.ts', "import { buildApp } from '../http/app.js'")).toEqual([])
    expect(check('src/http/routes/x.ts', "import { api } from '../api.js'")).toEqual([])
  })

  it('lets only the model adapter use the AI SDK', () => {
    const ai =
      "import { streamText } from 'ai'\nimport type { LanguageModelV3 } from '@ai-sdk/provider'\nimport { MockLanguageModelV3 } from 'ai/test'"
    expect(check('src/runtime/loop.ts', ai)).toEqual([
      "src/runtime/loop.ts imports 'ai': only the model adapter (src/runtime/model/) may use the AI SDK",
      "src/runtime/loop.ts imports '@ai-sdk/provider': only the model adapter (src/runtime/model/) may use the AI SDK",
      "src/runtime/loop.ts imports 'ai/test': only the model adapter (src/runtime/model/) may use the AI SDK",
    ])
    expect(check('src/tools/x.ts', "import { tool } from 'ai'")).toHaveLength(1)
    for (const path of [
      'src/runtime/model/adapter.ts',
      'src/runtime/model/stream.ts',
      'src/runtime/model/providers.ts',
      'src/runtime/model/scripted-model.ts',
    ]) {
      expect(check(path, ai)).toEqual([])
    }
    expect(
      check('src/runtime/loop.ts', "import { z } from 'zod'\nimport x from 'aim'\nimport y from 'ai-thing'"),
    ).toEqual([])
  })
})
