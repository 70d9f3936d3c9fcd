import type { EventLog } from '../../events/log.js'
import type { SessionView } from '../../projections/fold/model.js'

/** Reads a blob's content at once: what the synchronous chat conversion takes (src/runtime/loop/chat-messages.ts). */
export type BlobRead = (hash: string) => string | undefined

/**
 * The contents of the files attached in a view (src/runtime/inbox/attach.ts), fetched from the store before
 * the conversion that reads them: a store over the network answers a blob asynchronously.
 */
export async function attachedContents(blobs: EventLog['blobs'], view: SessionView): Promise<BlobRead> {
  const hashes = new Set<string>()
  for (const p of view.parts.values()) if (p.type === 'file' && p.blob !== undefined) hashes.add(p.blob)
  return fetchedBlobs(blobs, hashes)
}

/** The given blobs fetched, as a synchronous read (a hash not in the store reads undefined). */
export async function fetchedBlobs(blobs: EventLog['blobs'], hashes: Iterable<string>): Promise<BlobRead> {
  const contents = new Map<string, string>()
  for (const hash of new Set(hashes)) {
    const content = await blobs.get(hash)
    if (content !== undefined) contents.set(hash, content)
  }
  return (hash) => contents.get(hash)
}
