import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { z } from 'zod'
import { ChronicleError } from '../../events/errors.js'

/**
 * A backup is a directory (docs/BACKUP.md "The format"):
 *
 *   manifest.json   what it holds: the seq, the head digest at it, when, by which version — written last
 *   chronicle.db    the store at that seq, one SQLite file (no WAL)
 *   workspaces/     the workspace object store: objects.git/objects/… (content-addressed) and ws/<key>/{index,last,directory}
 */

export const MANIFEST = 'manifest.json'
export const BACKUP_DB = 'chronicle.db'
export const BACKUP_WORKSPACES = 'workspaces'

export const Manifest = z.strictObject({
  format: z.literal('chronicle-backup'),
  formatVersion: z.literal(1),
  seq: z.number().int().nonnegative(),
  digest: z.string().regex(/^([0-9a-f]{64})?$/),
  events: z.number().int().nonnegative(),
  createdAt: z.string().max(40),
  chronicleVersion: z.string().max(100),
})
export type Manifest = z.output<typeof Manifest>

/** The backup's manifest, or BACKUP_INVALID saying why it cannot be read. */
export async function readManifest(dir: string): Promise<Manifest> {
  const file = join(dir, MANIFEST)
  let text: string
  try {
    text = await readFile(file, 'utf8')
  } catch {
    throw invalid(`${dir} has no ${MANIFEST}: not a Chronicle backup, or one that did not finish`)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    throw invalid(`${file} is not JSON`)
  }
  const parsed = Manifest.safeParse(json)
  if (!parsed.success) throw invalid(`${file} is not a Chronicle backup manifest: ${parsed.error.issues[0]?.message}`)
  return parsed.data
}

export function invalid(message: string): ChronicleError {
  return new ChronicleError('BACKUP_INVALID', `${message}; nothing was replaced`)
}
