// Real software TPMs for tests (/work/shared/TPM.md's recipe): swtpm_setup "manufactures" a TPM
// state directory with an EK certificate from a swtpm_localca CA directory (one CA directory per
// manufacturer), swtpm serves it over TCP, and tpm2-tools 5.x talk to it through the "swtpm" TCTI.
// There is no resource manager in between, so every helper flushes what its commands loaded
// (else the third command fails with TPM_RC_OBJECT_MEMORY, 0x902).
//
// Clean-up: a started swtpm is our own child (no --daemon: a daemon's end could not be awaited),
// stopped by stop(), which resolves once it has exited, and killed when the test process exits
// however it exits. Temp dirs are the caller's (test/e2e/support/temp-dir.ts removes them).
// Readiness needs no polling: swtpm binds its sockets before it writes its pid file, so the pid
// file is a FIFO and the pid arriving in it means the ports are listening.
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { accessSync, constants, mkdirSync, openSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server, Socket } from 'node:net';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The executables the harness runs; `tpm2` is tpm2-tools 5's multiplexer (`tpm2 createek …`). */
const TOOLS = ['swtpm', 'swtpm_setup', 'swtpm_localca', 'tpm2', 'mkfifo'] as const;

function onPath(tool: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, tool);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {}
  }
  return undefined;
}

/** Why software TPMs cannot run here, or false when they can (for skipUnless). */
export function swtpmMissing(): string | false {
  const missing = TOOLS.filter((tool) => !onPath(tool));
  if (missing.length === 0) return false;
  return `${missing.join(', ')} not found (Debian: apt-get install swtpm swtpm-tools tpm2-tools; make host-packages as root)`;
}

export interface ManufacturedTpm {
  stateDir: string;
  caDir: string;
  /** The manufacturer's root and intermediate (issuer) certificates, PEM. */
  manufacturerCertsPem: string[];
}

/**
 * Manufactures a TPM in `stateDir` whose EK certificates (RSA at NV 0x1c00002, ECC at
 * 0x1c00016) are issued by the CA in `caDir`, which swtpm_localca creates on first use. TPMs
 * made with the same `caDir` come from one manufacturer.
 */
export async function manufactureTpm({
  caDir,
  stateDir,
}: {
  caDir: string;
  stateDir: string;
}): Promise<ManufacturedTpm> {
  mkdirSync(caDir, { recursive: true });
  mkdirSync(stateDir, { recursive: true });
  const localcaConf = join(caDir, 'swtpm-localca.conf');
  const localcaOptions = join(caDir, 'swtpm-localca.options');
  const setupConf = join(caDir, 'swtpm_setup.conf');
  writeFileSync(
    localcaConf,
    [
      `statedir = ${caDir}`,
      `signingkey = ${join(caDir, 'signkey.pem')}`,
      `issuercert = ${join(caDir, 'issuercert.pem')}`,
      `certserial = ${join(caDir, 'certserial')}`,
      '',
    ].join('\n'),
  );
  // Our own options rather than /etc/swtpm-localca.options: the platform certificate's fields.
  writeFileSync(
    localcaOptions,
    '--platform-manufacturer nodeflavor-test\n--platform-version 2.1\n--platform-model swtpm\n',
  );
  writeFileSync(
    setupConf,
    [
      `create_certs_tool = ${onPath('swtpm_localca') ?? 'swtpm_localca'}`,
      `create_certs_tool_config = ${localcaConf}`,
      `create_certs_tool_options = ${localcaOptions}`,
      '',
    ].join('\n'),
  );
  try {
    await run(
      'swtpm_setup',
      [
        '--tpm2',
        '--tpmstate',
        stateDir,
        '--create-ek-cert',
        '--create-platform-cert',
        '--config',
        setupConf,
        '--overwrite',
      ],
      { timeout: 120_000 },
    );
  } catch (error) {
    throw commandFailed('swtpm_setup', error);
  }
  return {
    stateDir,
    caDir,
    manufacturerCertsPem: [
      readFileSync(join(caDir, 'swtpm-localca-rootca-cert.pem'), 'utf8'),
      readFileSync(join(caDir, 'issuercert.pem'), 'utf8'),
    ],
  };
}

export interface RunningTpm {
  /** For TPM2TOOLS_TCTI / `tpm2 -T`. */
  tcti: string;
  stop(): Promise<void>;
}

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** Serves the TPM in `stateDir` on free TCP ports P, P + 1 (taken meanwhile: it tries others). */
export async function startTpm(stateDir: string): Promise<RunningTpm> {
  let lastFailure = '';
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePortPair();
    const started = await startSwtpm(stateDir, port, port + 1);
    if (typeof started !== 'string') return started;
    lastFailure = started;
    if (!/Address already in use/.test(started)) break;
  }
  throw new Error(`swtpm did not start for ${stateDir}: ${lastFailure}`);
}

async function startSwtpm(stateDir: string, port: number, ctrlPort: number): Promise<RunningTpm | string> {
  const fifo = join(stateDir, `ready-${randomUUID()}.fifo`);
  execFileSync('mkfifo', ['-m', '600', fifo]);
  // Read and write ends both ours: opening does not block, and swtpm's open for writing neither.
  const readyPipe = new Socket({
    fd: openSync(fifo, constants.O_RDWR | constants.O_NONBLOCK),
    readable: true,
  });
  const child = spawn(
    'swtpm',
    [
      'socket',
      '--tpm2',
      '--tpmstate',
      `dir=${stateDir}`,
      '--server',
      `type=tcp,port=${port}`,
      '--ctrl',
      `type=tcp,port=${ctrlPort}`,
      '--flags',
      'startup-clear',
      '--pid',
      `file=${fifo}`,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  running.add(child);
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  // 'exit' when it ran and ended; 'error' alone when it could not be run at all.
  const exited = new Promise<void>((resolve) => {
    const ended = () => {
      running.delete(child);
      resolve();
    };
    child.once('exit', ended);
    child.once('error', ended);
  });
  try {
    const outcome = await Promise.race([
      once(readyPipe, 'data').then(() => 'ready' as const),
      once(child, 'error').then(([error]) => `could not run swtpm: ${(error as Error).message}`),
      exited.then(() => `swtpm exited (${child.exitCode ?? child.signalCode}): ${stderr.trim()}`),
    ]);
    if (outcome !== 'ready') return outcome;
  } finally {
    readyPipe.destroy();
    unlinkSync(fifo);
  }
  return {
    tcti: `swtpm:host=127.0.0.1,port=${port}`,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * A free port P with P + 1 free too: the "swtpm" TCTI takes only the server port and talks to
 * the control channel on the next one. Both are held open together while checked, then released.
 */
async function freePortPair(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const first = await listenOn(0);
    if (!first) continue;
    const port = (first.address() as { port: number }).port;
    const second = port < 65535 ? await listenOn(port + 1) : undefined;
    await Promise.all(
      [first, second].map((server) => server && new Promise((resolve) => server.close(resolve))),
    );
    if (second) return port;
  }
  throw new Error('no two consecutive free TCP ports on 127.0.0.1');
}

function listenOn(port: number): Promise<Server | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

export class Tpm2CommandError extends Error {
  override name = 'Tpm2CommandError';
  readonly stderr: string;
  constructor(message: string, stderr: string) {
    super(message);
    this.stderr = stderr;
  }
}

function commandFailed(command: string, error: unknown): Tpm2CommandError {
  const failed = error as { code?: number | string; stderr?: string | Buffer; message?: string };
  const stderr = failed.stderr?.toString().trim() ?? '';
  return new Tpm2CommandError(
    `${command} failed (${failed.code ?? 'no exit code'}): ${stderr || failed.message}`,
    stderr,
  );
}

/** Runs `tpm2 <args>` (tpm2-tools 5) against the TPM at `tcti`; its stdout, or a Tpm2CommandError. */
export async function tpm2(
  tcti: string,
  args: readonly string[],
  options: { cwd?: string } = {},
): Promise<string> {
  try {
    const { stdout } = await run('tpm2', [...args], {
      cwd: options.cwd,
      env: { ...process.env, TPM2TOOLS_TCTI: tcti },
      timeout: 60_000,
    });
    return stdout;
  } catch (error) {
    throw commandFailed(`tpm2 ${args.join(' ')}`, error);
  }
}

/** Flushes every loaded transient object and session: what one tool left behind. */
async function flushLoaded(tcti: string): Promise<void> {
  await tpm2(tcti, ['flushcontext', '-t']);
  await tpm2(tcti, ['flushcontext', '-s']);
}

/**
 * Runs `work`, then `cleanUp` however `work` ended. A failing clean-up is reported, but never in
 * place of the failure of `work`, which says more.
 */
async function withCleanUp<T>(work: () => Promise<T>, cleanUp: () => Promise<void>): Promise<T> {
  let result: T;
  try {
    result = await work();
  } catch (error) {
    await cleanUp().catch(() => undefined);
    throw error;
  }
  await cleanUp();
  return result;
}

export interface TpmFile {
  path: string;
  bytes: Buffer;
}

export interface EkAndAk {
  /** TPM2B_PUBLIC of the EK (standard RSA template), as `tpm2_createek -u` writes it. */
  ekPub: TpmFile;
  /** TPM2B_PUBLIC of the AK (RSA-2048, RSASSA-SHA256, restricted signing). */
  akPub: TpmFile;
  /** The AK's Name as the TPM computed it. */
  akName: TpmFile;
  /** Saved contexts: what activateCredential loads the EK and AK from. */
  ekCtx: string;
  akCtx: string;
  /** The RSA EK certificate from NV index 0x1c00002, DER. */
  ekCert: TpmFile;
}

/** Creates the EK and a new AK under it in the TPM at `tcti`, writing their files into `workDir`. */
export async function createEkAndAk(tcti: string, workDir: string): Promise<EkAndAk> {
  mkdirSync(workDir, { recursive: true });
  const path = (name: string) => join(workDir, name);
  const cwd = { cwd: workDir };
  await withCleanUp(
    () => tpm2(tcti, ['createek', '-c', 'ek.ctx', '-G', 'rsa', '-u', 'ek.pub'], cwd),
    () => flushLoaded(tcti),
  );
  await withCleanUp(
    () =>
      tpm2(
        tcti,
        [
          'createak',
          '-C',
          'ek.ctx',
          '-c',
          'ak.ctx',
          '-G',
          'rsa',
          '-g',
          'sha256',
          '-s',
          'rsassa',
          '-u',
          'ak.pub',
          '-n',
          'ak.name',
        ],
        cwd,
      ),
    () => flushLoaded(tcti),
  );
  await tpm2(tcti, ['nvread', '0x1c00002', '-o', 'ek-cert.der'], cwd);
  const file = (name: string): TpmFile => ({ path: path(name), bytes: readFileSync(path(name)) });
  return {
    ekPub: file('ek.pub'),
    akPub: file('ak.pub'),
    akName: file('ak.name'),
    ekCtx: path('ek.ctx'),
    akCtx: path('ak.ctx'),
    ekCert: file('ek-cert.der'),
  };
}

/**
 * `tpm2_activatecredential` with the EK and AK createEkAndAk left in `workDir`, on the cred.blob
 * file `credBlob`: the recovered credential, or a Tpm2CommandError when the TPM refuses it. The
 * EK's authPolicy is PolicySecret(endorsement), hence the policy session.
 */
export async function activateCredential(
  tcti: string,
  workDir: string,
  credBlob: Uint8Array,
): Promise<Buffer> {
  const id = randomUUID();
  const blob = `cred-${id}.blob`;
  const session = `session-${id}.ctx`;
  const recovered = `recovered-${id}`;
  const cwd = { cwd: workDir };
  writeFileSync(join(workDir, blob), credBlob);
  await tpm2(tcti, ['startauthsession', '--policy-session', '-S', session], cwd);
  return withCleanUp(
    async () => {
      await tpm2(tcti, ['policysecret', '-S', session, '-c', 'e'], cwd);
      await tpm2(
        tcti,
        [
          'activatecredential',
          '-c',
          'ak.ctx',
          '-C',
          'ek.ctx',
          '-i',
          blob,
          '-o',
          recovered,
          '-P',
          `session:${session}`,
        ],
        cwd,
      );
      return readFileSync(join(workDir, recovered));
    },
    async () => {
      // The policy session stays saved (not loaded) after the command, pass or fail: flush it by
      // its context file; the EK and AK activatecredential loaded are transient objects.
      await tpm2(tcti, ['flushcontext', session], cwd);
      await flushLoaded(tcti);
    },
  );
}
