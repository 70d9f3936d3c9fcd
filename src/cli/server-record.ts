import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * Which server serves a data directory: `chronicle serve` writes its pid and
 * URL to `<dataDir>/server.json` once it listens and removes it when it
 * stops, so a command that must not run beside it (`chronicle restore`)
 * finds it whatever port it took — not only at CHRONICLE_URL. A record left
 * by a server that died is recognised by its pid being gone.
 */

const RECORD = 'server.json'

export interface ServerRecord {
  readonly pid: number
  readonly url: string
}

export function recordServer(dataDir: string, record: ServerRecord): () => void {
  const file = join(dataDir, RECORD)
  writeFileSync(file, `${JSON.stringify(record)}\n`, { mode: 0o600 })
  return () => {
    // only ours: another server may have started on this directory since
    if (readRecord(dataDir)?.pid === record.pid) rmSync(file, { force: true })
  }
}

/** The server recorded as serving `dataDir`, if its process is alive. */
export function servingServer(dataDir: string): ServerRecord | undefined {
  const record = readRecord(dataDir)
  return record && alive(record.pid) ? record : undefined
}

function readRecord(dataDir: string): ServerRecord | undefined {
  try {
    const parsed = JSON.parse(readFileSync(join(dataDir, RECORD), 'utf8')) as Partial<ServerRecord>
    if (Number.isInteger(parsed.pid) && typeof parsed.url === 'string')
      return { pid: parsed.pid as number, url: parsed.url }
  } catch {
    // none, or not ours to read: nothing recorded
  }
  return undefined
}

function alive(pid: number): boolean {
  if (pid === process.pid) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM' // another user's process: there
  }
}
