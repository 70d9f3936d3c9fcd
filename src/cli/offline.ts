import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { userInfo } from 'node:os'
import { join, resolve } from 'node:path'
import { loadConfig } from '../config.js'
import { secureDataDir } from '../data-dir.js'
import { createIdSource } from '../events/ids.js'
import { checkStoreFile } from '../events/integrity.js'
import type { EventStore } from '../events/store.js'
import { exportLinesOf, importSessions } from '../projections/transfer/export.js'
import { ATIF_VERSION, atifThrough } from '../projections/transfer/atif.js'
import { openStore } from '../projections/open.js'
import { postgresPorts, sqlitePorts, type StorePorts } from '../projections/store-ports.js'
import { rebuild } from '../projections/upkeep/rebuild.js'
import { SEARCH_FILE } from '../projections/search/sqlite-index.js'
import {
  type IndexRebuildReport,
  type IndexVerifyReport,
  rebuildIndex,
  verifyIndex,
} from '../projections/search/upkeep.js'
import { type VerifyReport, verify } from '../projections/upkeep/verify.js'
import { audit } from '../runtime/audit/audit.js'
import { invalid } from '../runtime/backup/manifest.js'
import { checkObjects, discard, installBackup, stageBackup } from '../runtime/backup/restore.js'
import { flag, Refusal, UsageError, type Args } from './args.js'
import { dataDirOf, dbPathOf, serverInfo } from './client.js'
import { servingServer } from './server-record.js'
import type { Terminal } from './terminal.js'

/**
 * Commands that work on the data directory's database directly: export,
 * import, rebuild, verify, audit, restore. Writers refuse while a server answers, because
 * the server is the log's one writer. An import creates new, read-only
 * sessions and prints each `<id in the file> → <new id>`.
 */

function open(create = false): EventStore {
  const postgres = loadConfig().store.url
  if (postgres) throw onPostgres()
  return openSqlite(create)
}

/** The data directory's SQLite store, whatever the configuration names: what `store copy` copies from. */
function openSqlite(create = false): EventStore {
  const dataDir = dataDirOf()
  const path = dbPathOf(dataDir)
  if (!existsSync(path) && !create) throw new Refusal(`no database at ${path} (set CHRONICLE_DATA_DIR)`)
  return openStore(secureDataDir(dataDir), { snapshotOnCommit: false })
}

/** A command that works on SQLite's store only, with PostgreSQL configured: said, rather than reading a stale file. */
function onPostgres(): Refusal {
  return new Refusal(
    "the configured store is PostgreSQL (CHRONICLE_DATABASE_URL or store.url): this command works on SQLite's store only; export, import, audit, rebuild, verify and store copy work on PostgreSQL (a PostgreSQL store is backed up and restored with pg_dump and pg_restore: docs/BACKUP.md)",
  )
}

async function refuseIfServing(args: Args): Promise<void> {
  if (args.flags.has('force')) return
  const { url } = serverInfo()
  const up = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) }).then(
    (r) => r.ok,
    () => false,
  )
  if (up)
    throw new Refusal(`a server is running at ${url}: stop it first (it is the log's only writer), or pass --force`)
}

/** `progress 12/40 sessions` on one rewritten stderr line. */
function progress(label: string, err: NodeJS.WritableStream = process.stderr) {
  let last = 0
  return (done: number, total: number) => {
    const now = Date.now()
    if (done !== total && now - last < 100) return
    last = now
    err.write(`\r${label} ${done}/${total}${done === total ? '\n' : ''}`)
  }
}

export async function exportCommand(args: Args, { line: out }: Terminal): Promise<number> {
  const id = args.positionals[0]
  if (!id) throw new UsageError('export needs a session id')
  const format = flag(args, 'format') ?? 'jsonl'
  if (format !== 'jsonl' && format !== 'atif') throw new UsageError('export --format is jsonl or atif')
  // read only, so on either engine
  const store = await openPorts()
  try {
    const file = flag(args, 'out')
    if (format === 'atif') {
      const atif = await atifThrough(store.ports.readModels, id, packageVersion())
      const document = `${JSON.stringify(atif, null, 2)}\n`
      if (file) {
        writeFileSync(file, document)
        process.stderr.write(`exported ${id} as ATIF (${ATIF_VERSION}) to ${file}\n`)
      } else out(document.trimEnd())
      return 0
    }
    const lines: string[] = []
    for await (const line of exportLinesOf(store.ports.log, id)) lines.push(line)
    if (file) {
      writeFileSync(file, `${lines.join('\n')}\n`)
      process.stderr.write(`exported ${lines.length - 1} events of ${id} to ${file}\n`)
    } else for (const l of lines) out(l)
    return 0
  } finally {
    await store.close()
  }
}

/** Chronicle's version, named as the ATIF document's agent version (src/ and dist/ sit as deep in the package). */
function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
    .version
}

export async function importCommand(args: Args, { line: out }: Terminal): Promise<number> {
  const file = args.positionals[0]
  if (!file) throw new UsageError('import needs a file (JSONL from `chronicle export`)')
  await refuseIfServing(args)
  const text = readFileSync(file, 'utf8')
  const store = await openPorts(true)
  try {
    const lines = text.split('\n').filter((l) => l.trim() !== '').length
    process.stderr.write(`importing ${lines} lines from ${file}…\n`)
    // offline, with no token: the import is the local user's
    const { username } = userInfo()
    const report = await importSessions(store.ports.log, createIdSource(), text, {
      id: `local:${username}`,
      name: username,
    })
    for (const s of report.sessions) out(`${s.originalId} → ${s.sessionId}`)
    const { exported, appended, sessions } = report
    out(
      `imported ${exported.originalId} as ${exported.sessionId}: ${appended} events appended, ${sessions.length} new sessions, read-only (fork one with --dir <path> to continue it)`,
    )
    const check = await store.verify()
    if (check.differences.length > 0 || check.chain.breaks.length > 0) {
      out(
        `verify found ${check.differences.length} differences and ${check.chain.breaks.length} chain breaks after import`,
      )
      return 1
    }
    return 0
  } finally {
    await store.close()
  }
}

export async function rebuildCommand(args: Args, { line: out }: Terminal): Promise<number> {
  await refuseIfServing(args)
  const postgres = loadConfig().store.url
  if (postgres) {
    const { rebuildPostgres } = await import('../projections/postgres/rebuild.js')
    const report = await rebuildPostgres(postgres, { progress: progress('rebuilding, events') })
    out(`rebuilt ${report.sessions} sessions from ${report.events} events in ${Math.round(report.ms)} ms`)
    const { rebuildPostgresIndex } = await import('../projections/search/postgres-upkeep.js')
    printIndexRebuild(await rebuildPostgresIndex(postgres), out)
    return 0
  }
  const store = open()
  try {
    const report = rebuild(store, { progress: progress('rebuilding, events') })
    out(`rebuilt ${report.sessions} sessions from ${report.events} events in ${Math.round(report.ms)} ms`)
  } finally {
    store.close()
  }
  // the search index (docs/SEARCH.md): deleted and built again from the log
  const dataDir = dataDirOf()
  printIndexRebuild(rebuildIndex(dbPathOf(dataDir), join(dataDir, SEARCH_FILE)), out)
  return 0
}

function printIndexRebuild(index: IndexRebuildReport, out: (line: string) => void): void {
  out(
    `rebuilt the search index: ${index.documents} documents from ${index.events} events in ${Math.round(index.ms)} ms`,
  )
}

/** `audit <session>` / `audit --all`: every step's request rebuilt from the log and checked against its digest. */
export async function auditCommand(args: Args, { line: out }: Terminal): Promise<number> {
  const id = args.positionals[0]
  const all = args.flags.has('all')
  if (!id === !all) throw new UsageError('audit needs a session id or --all')
  // read only, so on either engine, and while a server answers
  const store = await openPorts()
  try {
    const report = await audit(store.ports, all ? 'all' : [id as string], { progress: progress('auditing sessions') })
    for (const m of report.mismatches) {
      const rebuilt = m.computed === undefined ? '' : `\n  rebuilt:  ${m.computed}`
      out(
        `MISMATCH ${m.sessionId} seq ${m.seq} step ${m.step} (${m.messageId}): ${m.reason}\n  recorded: ${m.recorded}${rebuilt}`,
      )
    }
    const older = report.unrecorded > 0 ? `, ${report.unrecorded} logged before requests were recorded` : ''
    out(
      `${report.sessions} sessions, ${report.steps} model steps: ${report.verified} verified, ${report.mismatches.length} mismatches${older} (${report.ms} ms)`,
    )
    return report.mismatches.length === 0 ? 0 : 1
  } finally {
    await store.close()
  }
}

/**
 * The configured store as its ports: PostgreSQL's when one is configured, else the data dir's SQLite file
 * (made, if `create`); and `verify` of that store (`chronicle verify`'s checks).
 */
async function openPorts(
  create = false,
): Promise<{ ports: StorePorts; verify(): Promise<VerifyReport>; close(): Promise<void> }> {
  const url = loadConfig().store.url
  if (url) {
    const { openPostgresStore } = await import('../projections/postgres/open.js')
    const { verifyPostgresAt } = await import('../projections/postgres/verify.js')
    const log = await openPostgresStore(url)
    return {
      ports: postgresPorts(log),
      verify: () => verifyPostgresAt(url, { progress: progress('verifying') }),
      close: () => log.close(),
    }
  }
  const store = openSqlite(create)
  return {
    ports: sqlitePorts(store),
    verify: async () => verify(store, { progress: progress('verifying') }),
    close: async () => store.close(),
  }
}

export async function verifyCommand(args: Args, { line: out }: Terminal): Promise<number> {
  const head = flag(args, 'head')
  const anchor = head === undefined ? undefined : /^(\d+):([0-9a-f]{64})$/.exec(head)
  if (anchor === null) throw new UsageError('--head takes <seq>:<digest>, as verify printed it')
  const given = flag(args, 'url')
  if (given !== undefined) return verifyPostgresCommand(given, anchor?.[0], out)
  await refuseIfServing(args) // read models written while it reads would show as differences
  const postgres = loadConfig().store.url
  if (postgres) return verifyPostgresCommand(postgres, anchor?.[0], out)
  const store = open()
  try {
    const report = verify(store, {
      chainProgress: progress('checking the hash chain'),
      progress: progress('verifying sessions'),
      ...(anchor && { anchor: { seq: Number(anchor[1]), digest: anchor[2] as string } }),
    })
    printVerify(report, out)
    const dataDir = dataDirOf()
    const index = verifyIndex(dbPathOf(dataDir), join(dataDir, SEARCH_FILE))
    printIndexVerify(index, out)
    return report.differences.length === 0 && report.chain.breaks.length === 0 && index.differences.length === 0 ? 0 : 1
  } finally {
    store.close()
  }
}

/** The search index's verify, as lines: each difference, then what was compared (docs/SEARCH.md). */
function printIndexVerify(report: IndexVerifyReport, out: (line: string) => void): void {
  if (!report.present) {
    out('no search index (the server builds it when it starts)')
    return
  }
  if (report.stale) {
    out(
      `the search index was built from another log (through seq ${report.position}; the log's head is ${report.head}): the server builds it again when it starts`,
    )
    return
  }
  for (const d of report.differences) out(`SEARCH DIFF ${d}`)
  out(
    `search index through seq ${report.position} of ${report.head}: ${report.documents} documents checked, ${report.differences.length} differences`,
  )
}

/**
 * `verify --url postgres://…` (after pg_restore, docs/BACKUP.md), or `verify` with PostgreSQL configured: its
 * chains recomputed, every session against a fold of its log; with --head, its head must be that one (the one
 * recorded when it was dumped).
 */
async function verifyPostgresCommand(url: string, head: string | undefined, out: (line: string) => void) {
  if (!/^postgres(ql)?:\/\//.test(url)) throw new UsageError('--url takes postgres://user:password@host/database')
  const { verifyPostgresAt } = await import('../projections/postgres/verify.js')
  const report = await verifyPostgresAt(url, { progress: progress('verifying sessions') })
  printVerify(report, out)
  const at = `${report.chain.head.seq}:${report.chain.head.digest}`
  if (head !== undefined && head !== at) out(`MISMATCH its head is ${at}, not ${head}`)
  const { verifyPostgresIndex } = await import('../projections/search/postgres-upkeep.js')
  const index = await verifyPostgresIndex(url)
  printIndexVerify(index, out)
  const ok =
    report.differences.length === 0 &&
    report.chain.breaks.length === 0 &&
    index.differences.length === 0 &&
    (head === undefined || head === at)
  return ok ? 0 : 1
}

/** A verify report as lines: the chain's breaks and head, then each difference. */
function printVerify(report: VerifyReport, out: (line: string) => void): void {
  const { chain } = report
  for (const b of chain.breaks.slice(0, 50))
    out(`BROKEN seq ${b.seq}${b.sessionId && ` (${b.sessionId})`}: ${b.reason}`)
  const unchained = chain.unchained > 0 ? ` (${chain.unchained} logged before the chain began)` : ''
  out(
    chain.breaks.length === 0
      ? `chain intact: ${chain.events} events${unchained}; head ${chain.head.seq}:${chain.head.digest}`
      : `chain broken: first at seq ${(chain.breaks[0] as { seq: number }).seq}, ${chain.breaks.length} breaks in ${chain.events} events`,
  )
  for (const d of report.differences.slice(0, 50)) {
    out(
      `DIFF ${d.sessionId} ${d.entity} ${d.id}\n  stored:   ${JSON.stringify(d.stored)}\n  expected: ${JSON.stringify(d.expected)}`,
    )
  }
  out(`${report.sessions} sessions checked, ${report.differences.length} differences`)
}

/**
 * `store copy --to postgres://…`: the store into an empty PostgreSQL database (server stopped), then the
 * copy verified there — its chain, its read models against its log, and its head digest against this one's.
 */
export async function storeCommand(args: Args, { line: out }: Terminal): Promise<number> {
  const [sub] = args.positionals
  if (sub !== 'copy')
    throw new UsageError(sub === undefined ? 'store needs a subcommand: copy' : `unknown store subcommand ${sub}`)
  const to = flag(args, 'to') ?? loadConfig().store.url
  if (!to || !/^postgres(ql)?:\/\//.test(to))
    throw new UsageError(
      'store copy needs --to postgres://user:password@host/database (or CHRONICLE_DATABASE_URL, or store.url in the config)',
    )
  await refuseIfServing(args)
  const store = openSqlite()
  try {
    // PostgreSQL's modules load only for this command
    const { copyToPostgres } = await import('../projections/postgres/copy.js')
    const { verifyPostgresAt } = await import('../projections/postgres/verify.js')
    const { redactUrl } = await import('../events/postgres/url.js')
    const report = await copyToPostgres(store, to, { progress: progress('copying events') })
    out(
      `copied ${report.events} events of ${report.sessions} sessions and ${report.blobs} blobs to ${redactUrl(to)} in ${report.ms} ms`,
    )
    const copy = await verifyPostgresAt(to, { progress: progress('verifying sessions') })
    printVerify(copy, out)
    const source = report.sourceHead
    const sameHead = source.seq === copy.chain.head.seq && source.digest === copy.chain.head.digest
    if (report.rechained)
      out(`this log began before its hash chain (head ${source.seq}:${source.digest}): the copy's is chained anew`)
    else if (!sameHead) out(`MISMATCH the copy's head is not this log's: ${source.seq}:${source.digest}`)
    const ok = copy.differences.length === 0 && copy.chain.breaks.length === 0 && (sameHead || report.rechained)
    return ok ? 0 : 1
  } finally {
    store.close()
  }
}

/**
 * `restore <backup> [--head seq:digest]` (server stopped; docs/BACKUP.md): the backup is copied into the data dir
 * and checked there — SQLite's integrity_check, every chain and read model (`verify`), its head at the manifest's
 * seq and digest (and at --head's, printed when it was taken), every workspace object — before anything is
 * replaced; the replaced store is moved aside.
 */
export async function restoreCommand(args: Args, { line: out }: Terminal): Promise<number> {
  const backup = args.positionals[0]
  if (!backup) throw new UsageError('restore needs a backup directory (from `chronicle backup --out`)')
  const head = flag(args, 'head')
  const pinned = head === undefined ? undefined : /^(\d+):([0-9a-f]{64})$/.exec(head)
  if (pinned === null) throw new UsageError('--head takes <seq>:<digest>, as backup printed it')
  // a backup is SQLite's store: a server configured for PostgreSQL would never read it
  if (loadConfig().store.url) throw onPostgres()
  const { url } = serverInfo()
  const up = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) }).then(
    (r) => r.ok,
    () => false,
  )
  // never --force: the running server holds the store this would replace
  if (up) throw new Refusal(`a server is running at ${url}: stop it first, then restore (nothing was replaced)`)
  const dataDir = dataDirOf()
  const serving = servingServer(dataDir)
  if (serving)
    throw new Refusal(
      `a server (pid ${serving.pid}) is serving ${dataDir} at ${serving.url}: stop it first, then restore (nothing was replaced)`,
    )
  mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const staged = await stageBackup(resolve(backup), dataDir, stamp)
  try {
    const { manifest } = staged
    const file = checkStoreFile(staged.storeFile, { full: true })
    if (file.problems.length > 0) throw invalid(`its store is damaged: ${file.problems.slice(0, 3).join('; ')}`)
    const store = openStore(staged.storeFile, { snapshotOnCommit: false })
    try {
      const report = verify(store, {
        chainProgress: progress('checking the hash chain'),
        progress: progress('verifying sessions'),
        ...(pinned && { anchor: { seq: Number(pinned[1]), digest: pinned[2] as string } }),
      })
      const first = report.chain.breaks[0]
      if (first) throw invalid(`its hash chain breaks at seq ${first.seq}: ${first.reason}`)
      if (report.differences.length > 0)
        throw invalid(`${report.differences.length} read-model rows differ from its log`)
      const { seq, digest } = report.chain.head
      if (seq !== manifest.seq || digest !== manifest.digest)
        throw invalid(`its log's head is ${seq}:${digest}, not the manifest's ${manifest.seq}:${manifest.digest}`)
    } finally {
      store.close()
    }
    await checkObjects(staged)
    const aside = await installBackup(staged, dataDir, stamp)
    out(
      `restored the store at seq ${manifest.seq}, head ${manifest.seq}:${manifest.digest} (taken ${manifest.createdAt})`,
    )
    out(aside ? `the replaced store is kept in ${aside}` : 'there was no store to replace')
    return 0
  } catch (err) {
    await discard(staged)
    throw err
  }
}
