/**
 * Why a run's AbortSignal fired: a user's cancel ends the run `cancelled`;
 * a shutdown leaves it open, its cut-off work marked `interrupted`, for
 * recovery to resume after the restart.
 */
export const CANCELLED = 'cancelled'
export const SHUTDOWN = 'shutdown'

/** The error recorded for work an abort cut off. */
export function abortError(signal: AbortSignal): { kind: 'aborted' | 'interrupted'; message: string } {
  return signal.reason === SHUTDOWN
    ? { kind: 'interrupted', message: 'the server stopped before this finished' }
    : { kind: 'aborted', message: 'the run was cancelled' }
}
