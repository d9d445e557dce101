// The operator image without Docker: the repository's Dockerfile, read and carried out here. Its
// build stages run in scratch directories (their COPY and RUN instructions, as written), the
// final stage's COPY --from, WORKDIR, ENV, USER, EXPOSE, ENTRYPOINT and CMD become the image, and
// the distroless Node 24 base is stood in for by this host's Node 24 and the libraries it links.
// Because the Dockerfile is the only description, the two cannot drift; an instruction this
// reader does not reproduce fails the build (and test/unit/operator-image.test.ts) with a pointer
// here.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { dirname, isAbsolute, join, posix, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheDir } from '../cluster/versions.ts';
import { type ImageConfig, writeDockerArchive } from './docker-archive.ts';
import {
  copyArgs,
  type FinalStageConfig,
  finalStageConfig,
  parseDockerfile,
  type Stage,
} from './dockerfile.ts';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
/** The base the final stage must name for the stand-in below to be faithful. */
const DISTROLESS_NODE = /^gcr\.io\/distroless\/nodejs24-debian12(:[\w.-]+)?(@sha256:[0-9a-f]{64})?$/;
const DISTROLESS_NODE_BINARY = '/nodejs/bin/node';
const NONROOT = 65532;

export interface BuiltImage {
  reference: string;
  tarball: string;
  imageId: string;
}

export function readDockerfile(): { stages: Stage[]; final: FinalStageConfig } {
  const stages = parseDockerfile(readFileSync(join(repo, 'Dockerfile'), 'utf8'));
  return { stages, final: finalStageConfig(stages) };
}

function log(line: string): void {
  process.stderr.write(`[operator-image] ${line}\n`);
}

/**
 * Runs one build stage (WORKDIR, COPY from the build context, RUN) in a scratch directory and
 * returns that directory, which stands for the stage's filesystem root. A stage whose inputs are
 * unchanged is taken from the cache; `npm ci` results are hard-linked from a cache of their own.
 */
function runStage(stage: Stage, scratch: string): string {
  const root = join(scratch, `stage-${stage.name ?? 'unnamed'}`);
  let workdir = '/';
  const inContext = (path: string) => {
    const full = resolve(repo, path);
    if (!full.startsWith(repo)) throw new Error(`COPY source ${path} leaves the build context`);
    return full;
  };
  for (const instruction of stage.instructions) {
    const cwd = join(root, workdir);
    mkdirSync(cwd, { recursive: true });
    switch (instruction.keyword) {
      case 'WORKDIR':
        workdir = posix.resolve(workdir, instruction.args);
        break;
      case 'COPY': {
        const copy = copyArgs(instruction);
        if (copy.from)
          throw new Error(
            `Dockerfile line ${instruction.line}: COPY --from in a build stage is not reproduced`,
          );
        const toDir = copy.destination.endsWith('/') || copy.sources.length > 1;
        for (const source of copy.sources) {
          const target = toDir
            ? join(cwd, copy.destination, posix.basename(source))
            : join(cwd, copy.destination);
          cpSync(inContext(source), target, { recursive: true, verbatimSymlinks: true });
        }
        break;
      }
      case 'RUN':
        runCommand(instruction.args, cwd);
        break;
      default:
        throw new Error(
          `Dockerfile line ${instruction.line}: ${instruction.keyword} in a build stage is not reproduced by test/e2e/realnode/operator-image.ts`,
        );
    }
  }
  return root;
}

function runCommand(command: string, cwd: string): void {
  const env = { ...process.env, PATH: `${join(repo, 'bin')}:${process.env.PATH ?? ''}`, CI: 'true' };
  if (/^npm ci\b/.test(command)) {
    // npm ci's result depends only on the lock file, package.json and the flags: cache it.
    const key = createHash('sha256')
      .update(command)
      .update(readFileSync(join(cwd, 'package.json')))
      .update(readFileSync(join(cwd, 'package-lock.json')))
      .digest('hex')
      .slice(0, 16);
    const cached = join(cacheDir(), 'image-npm-ci', key);
    if (!existsSync(join(cached, 'node_modules'))) {
      log(`RUN ${command} (first time for this lock file)`);
      execFileSync('bash', ['-c', command], { cwd, env, stdio: ['ignore', 'ignore', 'inherit'] });
      mkdirSync(cached, { recursive: true });
      execFileSync('cp', ['-a', join(cwd, 'node_modules'), `${cached}/`]);
      return;
    }
    execFileSync('cp', ['-al', join(cached, 'node_modules'), `${cwd}/`]);
    return;
  }
  log(`RUN ${command}`);
  execFileSync('bash', ['-c', command], { cwd, env, stdio: ['ignore', 'ignore', 'inherit'] });
}

/** The distroless nodejs24 base: Node 24 at /nodejs/bin/node, the libraries it links, users, /tmp. */
function standInBase(rootfs: string): void {
  const node = realpathSync(join(repo, 'bin', 'node'));
  const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  if (!version.startsWith('v24.')) throw new Error(`the image needs Node 24; ./bin/node is ${version}`);
  const copyHostFile = (hostPath: string, imagePath: string) => {
    mkdirSync(join(rootfs, dirname(imagePath)), { recursive: true });
    cpSync(realpathSync(hostPath), join(rootfs, imagePath));
  };
  copyHostFile(node, DISTROLESS_NODE_BINARY);
  const ldd = execFileSync('ldd', [node], { encoding: 'utf8' });
  for (const match of ldd.matchAll(/(\/\S+)\s+\(0x/g)) {
    const library = match[1];
    if (library) copyHostFile(library, library);
  }
  // Resolve the dynamic loader by the path the binary names, and the libraries by /lib/x86_64-linux-gnu.
  for (const match of ldd.matchAll(/=>\s+(\/\S+)/g)) {
    const library = match[1];
    if (library) copyHostFile(library, library);
  }
  mkdirSync(join(rootfs, 'etc'), { recursive: true });
  writeFileSync(
    join(rootfs, 'etc/passwd'),
    `root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:${NONROOT}:${NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n`,
  );
  writeFileSync(join(rootfs, 'etc/group'), `root:x:0:\nnonroot:x:${NONROOT}:\n`);
  mkdirSync(join(rootfs, 'home/nonroot'), { recursive: true });
  mkdirSync(join(rootfs, 'tmp'), { recursive: true });
  chmodSync(join(rootfs, 'tmp'), 0o1777);
}

/** The image config a runtime sees: the final stage's, over the distroless base's PATH. */
export function operatorImageConfig(final: FinalStageConfig): ImageConfig {
  return {
    entrypoint: final.entrypoint,
    ...(final.cmd ? { cmd: final.cmd } : {}),
    env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', ...final.env],
    ...(final.workingDir ? { workingDir: final.workingDir } : {}),
    ...(final.user ? { user: final.user } : {}),
    exposedPorts: final.exposedPorts,
  };
}

/** Carries out the Dockerfile and writes `reference` as a docker-archive into `outDir`. */
export function buildOperatorImage(outDir: string, reference = 'nodeflavor:e2e'): BuiltImage {
  const started = Date.now();
  const { stages, final } = readDockerfile();
  if (!DISTROLESS_NODE.test(final.base)) {
    throw new Error(
      `the Dockerfile's final stage is FROM ${final.base}; test/e2e/realnode/operator-image.ts stands in only for gcr.io/distroless/nodejs24-debian12`,
    );
  }
  const scratch = mkdtempSync(join(outDir, '.operator-image-'));
  try {
    const rootfs = join(scratch, 'rootfs');
    standInBase(rootfs);
    const stageRoots = new Map<string, string>();
    const workdir = final.workingDir ?? '/';
    for (const copy of final.copies) {
      if (!copy.from) throw new Error('a final-stage COPY from the build context is not reproduced');
      const stage = stages.find((s) => s.name === copy.from);
      if (!stage) throw new Error(`COPY --from=${copy.from}: no such stage`);
      let stageRoot = stageRoots.get(copy.from);
      if (!stageRoot) {
        log(`stage ${copy.from}`);
        stageRoot = runStage(stage, scratch);
        stageRoots.set(copy.from, stageRoot);
      }
      const destination = posix.resolve(workdir, copy.destination);
      for (const source of copy.sources) {
        if (!isAbsolute(source)) throw new Error(`COPY --from=${copy.from} ${source}: use absolute paths`);
        const target =
          copy.sources.length > 1 || copy.destination.endsWith('/')
            ? join(rootfs, destination, posix.basename(source))
            : join(rootfs, destination);
        mkdirSync(dirname(target), { recursive: true });
        cpSync(join(stageRoot, source), target, { recursive: true, verbatimSymlinks: true });
      }
    }
    const tarball = join(outDir, `${reference.replace(/[^A-Za-z0-9.-]/g, '_')}.tar`);
    const imageId = writeDockerArchive(rootfs, reference, operatorImageConfig(final), tarball);
    log(`${reference} built in ${((Date.now() - started) / 1000).toFixed(0)} s (${imageId.slice(0, 12)})`);
    return { reference, tarball, imageId };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** The pod sandbox image, from the pause binary build-binaries.sh makes. */
export function buildPauseImage(pauseBinary: string, outDir: string, reference: string): BuiltImage {
  const scratch = mkdtempSync(join(outDir, '.pause-image-'));
  try {
    const rootfs = join(scratch, 'rootfs');
    mkdirSync(rootfs);
    cpSync(pauseBinary, join(rootfs, 'pause'));
    chmodSync(join(rootfs, 'pause'), 0o755);
    const tarball = join(outDir, 'pause.tar');
    const imageId = writeDockerArchive(
      rootfs,
      reference,
      { entrypoint: ['/pause'], user: '65535:65535' },
      tarball,
    );
    return { reference, tarball, imageId };
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
