import { spawn } from 'node:child_process'
import { renameSync, writeFileSync } from 'node:fs'

/**
 * On a cluster (docs/CLUSTER.md "Side effects the database cannot fence"): a
 * tool's process group is killed once its node's lease runs out, even if the
 * node cannot do it itself. A node that is frozen (SIGSTOP, a paused VM) or
 * killed does nothing, while another node resumes its runs.
 *
 * The node rewrites a lease file at every heartbeat with the lease's end, in
 * wall-clock ms. A watchdog for each tool is a process of its own, outside the
 * node and the tool's group. It reads that file ten times a second and kills
 * the group with SIGKILL once the time is past it. It ends when the group
 * does.
 *
 * The watchdog is a few lines of perl with no module but Time::HiRes (whole
 * seconds without it). A system without perl runs tools without one.
 */

const SCRIPT = `
my ($group, $file) = @ARGV;
my $now = eval { require Time::HiRes; \\&Time::HiRes::time } || sub { time };
while (kill 0, -$group) {
  my $until = 0;
  if (open my $h, '<', $file) { $until = <$h> // 0; close $h }
  if ($now->() * 1000 > $until) { kill 'KILL', -$group; exit 0 }
  select undef, undef, undef, 0.1;
}
`

/** Watches the process group `group` (a detached child's pid) against the lease in `leaseFile`. */
export function watchLease(group: number, leaseFile: string): void {
  const watchdog = spawn('perl', ['-e', SCRIPT, String(group), leaseFile], { detached: true, stdio: 'ignore' })
  watchdog.on('error', () => {}) // no perl: the tool runs without a watchdog (docs/CLUSTER.md)
  watchdog.unref()
}

/** The lease runs until `untilMs` (wall clock): written whole (a rename), so a watchdog never reads half of it. */
export function writeLease(leaseFile: string, untilMs: number): void {
  const partial = `${leaseFile}.${process.pid}.tmp`
  writeFileSync(partial, String(Math.floor(untilMs)), { mode: 0o600 })
  renameSync(partial, leaseFile)
}
