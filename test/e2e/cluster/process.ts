// A child process that cannot outlive us. Each component runs under a tiny bash guard that
// kills it when our end of its stdin pipe closes, which the kernel does when this process
// exits for any reason (also SIGKILL), so no etcd or kube-apiserver is ever orphaned.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createWriteStream, readFileSync, type WriteStream } from 'node:fs';

const GUARD = `
exec 3<&0
"$@" </dev/null &
child=$!
(
  while read -r -u 3 _; do :; done
  kill -TERM "$child" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$child" 2>/dev/null || exit 0; sleep 0.1; done
  kill -KILL "$child" 2>/dev/null
) &
watcher=$!
wait "$child"
rc=$?
kill "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null
exit "$rc"
`;

const TAIL_LINES = 40;

export class ManagedProcess {
  private readonly child: ChildProcess;
  private readonly log: WriteStream;
  private readonly tail: string[] = [];
  private exitCode: number | null | undefined;
  readonly exited: Promise<number | null>;

  readonly name: string;

  constructor(name: string, binary: string, args: string[], logPath: string, env?: NodeJS.ProcessEnv) {
    this.name = name;
    this.log = createWriteStream(logPath, { flags: 'a' });
    this.child = spawn('bash', ['-c', GUARD, name, binary, ...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: env ?? process.env,
    });
    const keep = (chunk: Buffer) => {
      this.log.write(chunk);
      for (const line of chunk.toString('utf8').split('\n')) {
        if (line.trim() === '') continue;
        this.tail.push(line);
        if (this.tail.length > TAIL_LINES) this.tail.shift();
      }
    };
    this.child.stdout?.on('data', keep);
    this.child.stderr?.on('data', keep);
    this.exited = new Promise((resolve) => {
      this.child.on('exit', (code) => {
        this.exitCode = code;
        resolve(code);
      });
    });
  }

  get running(): boolean {
    return this.exitCode === undefined;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The component's own pid (the guard's child that is not its watcher), for RSS readings. */
  componentPid(): number | undefined {
    if (!this.child.pid) return undefined;
    try {
      const out = execFileSync('pgrep', ['-P', String(this.child.pid)], { encoding: 'utf8' });
      for (const pid of out.split('\n').filter(Boolean).map(Number)) {
        const comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
        if (comm !== 'bash') return pid;
      }
    } catch {
      // gone
    }
    return undefined;
  }

  lastLines(): string {
    return this.tail.map((line) => `  [${this.name}] ${line}`).join('\n');
  }

  /** Stops the component (SIGTERM, then SIGKILL after 10 s) and waits for it to exit. */
  async stop(): Promise<void> {
    if (this.running) this.child.stdin?.end();
    await this.exited;
    await new Promise<void>((resolve) => this.log.end(resolve));
  }

  /** SIGKILL the component itself (not its guard): a crash, as fault tests want it. */
  async kill(): Promise<void> {
    if (!this.running) return;
    // Kill the guard's children (the component and its watcher); the guard then exits.
    try {
      execFileSync('pkill', ['-KILL', '-P', String(this.child.pid)]);
    } catch {
      // already gone
    }
    await this.exited;
  }
}

/**
 * Removes `dir` once this process is gone, however it ends (also SIGKILL): a detached shell that
 * ignores signals waits for its stdin pipe to close, gives the components a moment to exit
 * (their guards stop them on the same event), then deletes the directory.
 */
export function startJanitor(dir: string): { release: () => void } {
  const janitor = spawn(
    'bash',
    [
      '-c',
      `trap '' INT TERM HUP
while read -r _; do :; done
for _ in $(seq 50); do pgrep -f -- "$1/" >/dev/null || break; sleep 0.2; done
rm -rf -- "$1"`,
      'janitor',
      dir,
    ],
    { stdio: ['pipe', 'ignore', 'ignore'], detached: true },
  );
  janitor.unref();
  const stdin = janitor.stdin;
  // The pipe must not keep our event loop alive either.
  (stdin as unknown as { unref?: () => void } | null)?.unref?.();
  return { release: () => stdin?.end() };
}
