import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

/** Every file and directory under `dir` with its exact bytes (directories as `<dir>`), for byte-for-byte checks. */
export function snapshot(dir: string, prefix = ''): Record<string, string> {
  const out: Record<string, string> = {}
  for (const entry of readdirSync(join(dir, prefix), { withFileTypes: true }).sort((a, b) =>
    a.name.localeCompare(b.name),
  )) {
    const rel = prefix === '' ? entry.name : `${prefix}/${entry.name}`
    if (entry.isDirectory()) {
      out[`${rel}/`] = '<dir>'
      Object.assign(out, snapshot(dir, rel))
    } else if (entry.isSymbolicLink()) out[rel] = '<symlink>'
    else out[rel] = readFileSync(join(dir, rel)).toString('base64')
  }
  return out
}

/** What a snapshot holds for text files, base64-encoded as snapshot() records them. */
export function files(texts: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(texts).map(([k, v]) => [k, k.endsWith('/') ? '<dir>' : Buffer.from(v).toString('base64')]),
  )
}
