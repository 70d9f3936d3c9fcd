import { setFlagsFromString } from 'node:v8'

/**
 * The young generation of the server's worker threads (the search index's, a
 * backup's, a tool's task). `npm start` gives the main thread a 64 MiB
 * semi-space (README "Benchmarks"), but V8's flags belong to the process, and
 * a worker's `resourceLimits` cannot lower what a flag sets: the search index's
 * worker, about 10 MiB of live heap, grew its young generation to 128 MiB after
 * a few thousand sessions, a step of some 60 MiB in the server's resident size
 * (docs/ARCHITECTURE.md "Memory"). An isolate reads the flag when it is made,
 * so setting it back once the main thread's exists gives the workers made after
 * V8's own default and leaves the main thread's as the command line set it.
 */

/** MiB: V8's default maximum semi-space on 64-bit */
export const WORKER_SEMI_SPACE_MB = 16

/** Gives the worker threads made from now on V8's default semi-space, whatever the command line or NODE_OPTIONS set. */
export function keepWorkerHeapsSmall(): void {
  setFlagsFromString(`--max-semi-space-size=${WORKER_SEMI_SPACE_MB}`)
}
