// Failpoints for crash tests: NODEFLAVOR_FAILPOINTS=name[,name] makes the process SIGKILL itself
// when it reaches that point, so a test can prove a crash exactly there loses nothing. Read once
// at start-up; unset (always, outside tests) it costs one Set lookup.
const enabled = new Set((process.env.NODEFLAVOR_FAILPOINTS ?? '').split(',').filter(Boolean));

export type Failpoint = 'after-binding-recorded' | 'after-verification-recorded';

export function failpoint(name: Failpoint): void {
  if (enabled.has(name)) process.kill(process.pid, 'SIGKILL');
}
