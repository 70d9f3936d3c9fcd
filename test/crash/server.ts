import { loadConfig } from '../../src/config.js'
import { createChronicle } from '../../src/main.js'

/**
 * The server process the crash harness kills: the real composition root
 * (src/main.ts) configured from the environment, exactly as `chronicle serve`
 * would be. Prints one line the harness waits for, with what recovery did.
 * SIGTERM stops it gracefully (the harness's final, clean shutdown).
 */
const chronicle = await createChronicle(loadConfig())
const url = await chronicle.start()
const r = chronicle.recovery
const recovered = r && {
  resumed: r.resumed.length,
  cancelled: r.cancelled.length,
  failed: r.failed.length,
  woken: r.deliver.length,
}
process.stdout.write(`crash-server listening ${url} ${JSON.stringify(recovered ?? {})}\n`)
process.once('SIGTERM', () => {
  void chronicle.stop().then(() => process.exit(0))
})
