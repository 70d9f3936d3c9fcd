// The attacker for the race specs (secrets.test.ts): a workspace process that swaps what a name
// is as fast as it can, each swap one atomic rename.
//   node name-swapper.cjs <name> <ms> <good> <bad> [<hold µs>]
// `good` and `bad` are each `link:<target>` (a symlink), `hard:<file>` (a hard link to an
// existing file: a regular file, a FIFO) or `dir:<directory>` (that directory itself, moved in and
// back out: two renames). Each is held for up to <hold µs> (random, 0 by default: a reader slower
// than the swaps then never sees one whole). Prints "ready" once it swaps; after <ms> leaves
// <name> as <good>. A reader stuck opening a FIFO among them is then let go: the FIFO is opened for
// writing, and closed.
const { closeSync, constants, linkSync, lstatSync, openSync, renameSync, rmSync, symlinkSync } = require('node:fs')

const [name, ms, ...specs] = process.argv.slice(2)
const tmp = `${name}.swap`
let parked // the directory moved in as <name>, and where it goes back to
// A directory the victim made at <name> meanwhile (a write tool making its parents) is removed.
const put = (spec) => {
  for (;;) {
    try {
      return place(spec)
    } catch (err) {
      if (!['EISDIR', 'ENOTEMPTY', 'EEXIST', 'ERR_FS_EISDIR'].includes(err.code)) throw err
      try {
        rmSync(name, { recursive: true, force: true })
      } catch {} // written into meanwhile: again
    }
  }
}
const place = (spec) => {
  const [kind, target] = spec.startsWith('dir:') ? ['dir:', spec.slice(4)] : [spec.slice(0, 5), spec.slice(5)]
  if (parked) renameSync(name, parked)
  parked = undefined
  if (kind === 'dir:') {
    rmSync(name, { force: true })
    renameSync(target, name)
    parked = target
    return
  }
  rmSync(tmp, { force: true })
  if (kind === 'link:') symlinkSync(target, tmp)
  else linkSync(target, tmp)
  renameSync(tmp, name)
}
const [good, bad, holdUs = '0'] = specs
const hold = () => {
  for (const until = performance.now() + (Math.random() * Number(holdUs)) / 1000; performance.now() < until; );
}
const end = Date.now() + Number(ms)
process.stdout.write('ready\n')
for (let i = 0; Date.now() < end; i++) {
  put(i % 2 ? bad : good)
  hold()
}
put(good)
const fifo = [good, bad].find((s) => s.startsWith('hard:') && lstatSync(s.slice(5)).isFIFO())?.slice(5)
if (fifo) {
  for (const until = Date.now() + 300; Date.now() < until; ) {
    try {
      closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK)) // ENXIO while nobody reads
    } catch {}
  }
}
