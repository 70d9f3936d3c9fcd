// The attacker for the instruction-file race specs (secrets.test.ts): a workspace process that
// swaps what a name points at as fast as it can, each swap one atomic rename.
//   node name-swapper.cjs <name> <ms> <good> <bad>
// `good` and `bad` are a symlink target each (link) or an existing file to hard-link (a regular
// file, a FIFO). Prints "ready" once it swaps; after <ms> leaves <name> as <good>. A reader
// stuck opening <bad> as a FIFO is then let go: the FIFO is opened for writing, and closed.
const { closeSync, constants, linkSync, lstatSync, openSync, renameSync, rmSync, symlinkSync } = require('node:fs')

const [name, ms, good, bad] = process.argv.slice(2)
const mode = process.argv.includes('--link') ? 'link' : 'hard'
const tmp = `${name}.swap`
const put = (target) => {
  rmSync(tmp, { force: true })
  if (mode === 'link') symlinkSync(target, tmp)
  else linkSync(target, tmp)
  renameSync(tmp, name)
}
const end = Date.now() + Number(ms)
process.stdout.write('ready\n')
for (let i = 0; Date.now() < end; i++) put(i % 2 ? bad : good)
put(good)
if (mode === 'hard' && lstatSync(bad).isFIFO()) {
  for (const until = Date.now() + 300; Date.now() < until; ) {
    try {
      closeSync(openSync(bad, constants.O_WRONLY | constants.O_NONBLOCK)) // ENXIO while nobody reads
    } catch {}
  }
}
