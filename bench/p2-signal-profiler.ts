// A CPU profile of just the measured window of a server process (not its start-up, which under
// tsx is mostly compiling TypeScript): SIGUSR2 starts the V8 sampling profiler, the next SIGUSR2
// stops it and writes <dir>/<name>-<n>.cpuprofile (the format `node --cpu-prof` writes).
// Used by the P2 webhook server and the P3 issuer.

import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';

export interface SignalProfiler {
  /** Stops a running profile and writes it (call before exiting). */
  flush(): Promise<void>;
}

export function profileOnSignal(dir: string, name: string): SignalProfiler {
  const session = new Session();
  session.connect();
  let running = false;
  let count = 0;
  let chain: Promise<void> = session.post('Profiler.enable').then(() => undefined);

  const stop = async () => {
    if (!running) return;
    running = false;
    const { profile } = await session.post('Profiler.stop');
    count += 1;
    writeFileSync(join(dir, `${name}-${count}.cpuprofile`), JSON.stringify(profile));
  };
  const toggle = async () => {
    if (running) {
      await stop();
      return;
    }
    await session.post('Profiler.start');
    running = true;
  };
  process.on('SIGUSR2', () => {
    chain = chain.then(toggle, toggle);
  });
  return {
    flush: async () => {
      chain = chain.then(stop, stop);
      await chain;
    },
  };
}

/** The pid a profiled child wrote to its ready file, signalled to start or stop its profile. */
export function toggleProfile(pid: number | undefined): void {
  if (pid !== undefined) process.kill(pid, 'SIGUSR2');
}
