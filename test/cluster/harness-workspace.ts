import type { RecordedWorkspace } from './harness-checks.js'
import { type Answer, call, type Incarnation } from './harness-fleet.js'

/**
 * The cluster harness's one question about a session's workspace: its last recorded tree, with every file's
 * content, as a node answers it (GET /sessions/:id/files, then ?path= for each file). The harness asks the
 * node that owns the session; a node that cannot answer says why (a survivor that claimed the session after
 * its snapshot holds no objects of it while workspaces do not move between nodes: docs/CLUSTER.md "What is
 * not built yet"). When the owner cannot, the others are asked too, so the report can tell a workspace that
 * differs from one that is only out of the owner's reach.
 */
export async function recordedAt(node: Incarnation, token: string, sessionId: string): Promise<RecordedWorkspace> {
  const path = `/sessions/${sessionId}/files`
  const why = (r: Answer, what: string) =>
    `${node.name} answered ${r.status} ${r.json?.code} for ${what}: ${r.json?.detail ?? r.json?.message}`
  const listed = await call(node.process.url, token, 'GET', path)
  if (listed.status !== 200) return { unreadable: why(listed, 'its files') }
  const files = new Map<string, Buffer>()
  for (const f of listed.json.files as { path: string; type: string }[]) {
    if (f.type !== 'file') continue
    const r = await call(node.process.url, token, 'GET', `${path}?path=${encodeURIComponent(f.path)}`)
    if (r.status !== 200) return { unreadable: why(r, `${f.path} of the snapshot at ${listed.json.snapshotSeq}`) }
    files.set(f.path, Buffer.from(r.json.content as string, r.json.encoding === 'base64' ? 'base64' : 'utf8'))
  }
  return { files, snapshotSeq: listed.json.snapshotSeq, node: node.name }
}

/** The owner's answer; when it cannot give one, the first other node's that can, beside it. */
export async function recordedWorkspace(
  owner: Incarnation,
  others: readonly Incarnation[],
  token: string,
  sessionId: string,
): Promise<RecordedWorkspace> {
  const answer = await recordedAt(owner, token, sessionId)
  if (!('unreadable' in answer)) return answer
  for (const node of others) {
    const elsewhere = await recordedAt(node, token, sessionId)
    if (!('unreadable' in elsewhere)) return { ...answer, elsewhere }
  }
  return answer
}
