// Failpoints for fault tests, set with NODEFLAVOR_FAILPOINTS=name[,name=value]... and read once at
// start-up; unset (always, outside tests) each check costs one Map lookup.
//   - crash points (`failpoint`): the process SIGKILLs itself when it reaches that point, so a
//     test can prove a crash exactly there loses nothing;
//   - faults (`faultEnabled`, `faultValue`): the process behaves as under a fault the real world
//     makes but a test cannot time, e.g. a key ring watch that went quiet (a stalled watch is
//     only noticed after its inactivity timeout), or the registration of an older release.
const enabled = new Map<string, string>();
for (const entry of (process.env.NODEFLAVOR_FAILPOINTS ?? '').split(',').filter(Boolean)) {
  const at = entry.indexOf('=');
  enabled.set(at < 0 ? entry : entry.slice(0, at), at < 0 ? '' : entry.slice(at + 1));
}

/**
 * The crash points between the steps of a join (ADR 0016), in order: a fault test kills the
 * leader at each and checks that the next one ends the join the same way, saying the same.
 */
export const JOIN_FAILPOINTS = [
  'after-name-claimed',
  'after-node-read',
  'after-use-counted',
  'after-csr-approved',
  'after-node-judged',
  'after-secret-deleted',
] as const;
type Failpoint = (typeof JOIN_FAILPOINTS)[number];

export function failpoint(name: Failpoint): void {
  if (enabled.has(name)) process.kill(process.pid, 'SIGKILL');
}

/** `freeze-keyring-watch`: the key ring watch delivers the first ring and then nothing more. */
type Fault = 'freeze-keyring-watch';

export function faultEnabled(name: Fault): boolean {
  return enabled.has(name);
}

/** `registration-revision=N`: this process generates its admission registration as revision N. */
type FaultValue = 'registration-revision';

export function faultValue(name: FaultValue): string | undefined {
  return enabled.get(name);
}
