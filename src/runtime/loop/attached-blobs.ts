import type { EventLog } from '../../events/log.js'
import type { Part, SessionView } from '../../projections/fold/model.js'

/** Reads a blob's content at once: what the synchronous chat conversion takes (src/runtime/loop/chat-messages.ts). */
export type BlobRead = (hash: string) => string | undefined

/**
 * The contents of the files attached in a view (src/runtime/inbox/attach.ts), fetched from the store before
 * the conversion that reads them: a store over the network answers a blob asynchronously.
 */
export async function attachedContents(blobs: EventLog['blobs'], view: SessionView): Promise<BlobRead> {
  return fetchedBlobs(blobs, attachedHashes(view.parts.values()))
}

/** The given blobs fetched, as a synchronous read (a hash not in the store reads undefined). */
export async function fetchedBlobs(blobs: EventLog['blobs'], hashes: Iterable<string>): Promise<BlobRead> {
  const contents = new Map<string, string>()
  await fetchInto(blobs, hashes, contents)
  return (hash) => contents.get(hash)
}

/** Fetches the blobs `into` lacks (a hash not in the store is left out). */
export async function fetchInto(
  blobs: EventLog['blobs'],
  hashes: Iterable<string>,
  into: Map<string, string>,
): Promise<void> {
  for (const hash of hashes) {
    if (into.has(hash)) continue
    const content = await blobs.get(hash)
    if (content !== undefined) into.set(hash, content)
  }
}

/** The blobs of a view's attached files. */
export function attachedHashes(parts: Iterable<Part>): string[] {
  const out: string[] = []
  for (const p of parts) if (p.type === 'file' && p.blob !== undefined) out.push(p.blob)
  return out
}
