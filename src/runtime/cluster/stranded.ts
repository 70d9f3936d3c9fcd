import type { Stranded } from '../../events/cluster.js'
import { ChronicleError } from '../../events/errors.js'
import type { EventLog } from '../../events/log.js'

/**
 * A pinned session's run is not moved silently (docs/CLUSTER.md "Workspaces that move"): when its node dies
 * and no live node may write its directory, a surviving node records that its work waits for a node on that
 * machine (session.stranded), so a client watching it, on any node, knows why nothing happens.
 *
 * Each is appended on the version the membership found it at, from any node (AppendOptions.anyNode): if the
 * session moved since — a node on its machine claimed it, another survivor recorded it first — the append is
 * a VERSION_CONFLICT and nothing is recorded; a later look finds it again if it is still stranded.
 */
export async function recordStranded(log: Pick<EventLog, 'append'>, stranded: readonly Stranded[]): Promise<number> {
  let recorded = 0
  for (const { sessionId, version, node, host } of stranded) {
    try {
      await log.append(sessionId, [{ type: 'session.stranded', data: { node, host } }], {
        meta: { actor: 'runtime' },
        expectedVersion: version,
        anyNode: true,
      })
      recorded++
    } catch (err) {
      if (!(err instanceof ChronicleError && err.code === 'VERSION_CONFLICT')) throw err
    }
  }
  return recorded
}
