/**
 * Renders at most once per animation frame: events arrive far faster than a
 * screen refreshes (a model streams 50 deltas a second and more), so the
 * page folds each one into its model at once and draws what the model holds
 * at the next frame.
 */
export function frameScheduler(draw: () => void): () => void {
  let pending = false
  const run = () => {
    pending = false
    draw()
  }
  return () => {
    if (pending) return
    pending = true
    // a hidden tab gets no frames: draw on a timer instead, so the model's revision still reaches the view
    if (typeof document !== 'undefined' && document.visibilityState === 'hidden') setTimeout(run, 250)
    else requestAnimationFrame(run)
  }
}
