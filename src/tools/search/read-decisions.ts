import type { PermissionDecision, ToolContext } from '../tool.js'
import type { Tick } from './time-slice.js'

/** Paths checked per request while all of them are allowed. */
const BATCH = 256

/**
 * The `read` rules' decision for each of many paths (grep's candidate files,
 * glob's matches) without one rules evaluation and session lookup per path.
 * A check with several patterns is `allow` only when every pattern is allowed
 * (docs/TOOLS.md, Permissions), so one check clears a whole batch in the
 * usual case; a batch that is not all allowed is split in halves until each
 * path's decision is known — about k·log(n) checks for the k paths that ask
 * or are denied. Nothing is asked or recorded.
 */
export async function readDecisions(
  ctx: ToolContext,
  paths: readonly string[],
  tick: Tick,
): Promise<PermissionDecision[]> {
  const decisions: PermissionDecision[] = new Array(paths.length)
  const settle = (from: number, to: number) => {
    const decision = ctx.check({ permission: 'read', patterns: paths.slice(from, to) })
    if (decision === 'allow' || to - from === 1) {
      decisions.fill(decision, from, to)
      return
    }
    const mid = (from + to) >>> 1
    settle(from, mid)
    settle(mid, to)
  }
  for (let from = 0; from < paths.length; from += BATCH) {
    settle(from, Math.min(from + BATCH, paths.length))
    await tick()
  }
  return decisions
}
