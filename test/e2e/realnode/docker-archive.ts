// Writes an image as a docker-archive tarball (the `docker save` layout: manifest.json, the image
// config, one layer tar), which `ctr images import` takes. One layer from one directory, built
// with the system tar in a reproducible way (sorted names, root-owned, epoch mtimes), so the same
// content gives the same image ID. No Docker engine or registry is involved.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export interface ImageConfig {
  entrypoint: string[];
  cmd?: string[];
  env?: string[];
  workingDir?: string;
  user?: string;
  exposedPorts?: number[];
}

function sha256File(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** The image config JSON (OCI/docker image spec) for one layer with the given diff ID. */
export function imageConfigJson(config: ImageConfig, layerDigest: string): string {
  return JSON.stringify({
    architecture: 'amd64',
    os: 'linux',
    created: '1970-01-01T00:00:00Z',
    config: {
      Entrypoint: config.entrypoint,
      ...(config.cmd ? { Cmd: config.cmd } : {}),
      ...(config.env ? { Env: config.env } : {}),
      ...(config.workingDir ? { WorkingDir: config.workingDir } : {}),
      ...(config.user ? { User: config.user } : {}),
      ...(config.exposedPorts
        ? { ExposedPorts: Object.fromEntries(config.exposedPorts.map((port) => [`${port}/tcp`, {}])) }
        : {}),
    },
    rootfs: { type: 'layers', diff_ids: [`sha256:${layerDigest}`] },
    history: [{ created: '1970-01-01T00:00:00Z', created_by: 'nodeflavor test/e2e/realnode' }],
  });
}

/**
 * Writes `reference` (e.g. "nodeflavor:dev") with `rootfs` as its only layer to `outFile`.
 * Returns the image ID (sha256 of the config).
 */
export function writeDockerArchive(
  rootfs: string,
  reference: string,
  config: ImageConfig,
  outFile: string,
): string {
  const work = mkdtempSync(join(dirname(outFile), '.image-'));
  try {
    const layer = join(work, 'layer.tar');
    execFileSync('tar', [
      '--create',
      `--file=${layer}`,
      '--sort=name',
      '--owner=0',
      '--group=0',
      '--numeric-owner',
      '--mtime=@0',
      '--format=posix',
      '--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime',
      `--directory=${rootfs}`,
      '.',
    ]);
    const layerDigest = sha256File(layer);
    mkdirSync(join(work, layerDigest));
    renameSync(layer, join(work, layerDigest, 'layer.tar'));
    const configJson = imageConfigJson(config, layerDigest);
    const imageId = createHash('sha256').update(configJson).digest('hex');
    writeFileSync(join(work, `${imageId}.json`), configJson);
    writeFileSync(
      join(work, 'manifest.json'),
      JSON.stringify([
        { Config: `${imageId}.json`, RepoTags: [reference], Layers: [`${layerDigest}/layer.tar`] },
      ]),
    );
    execFileSync('tar', [
      '--create',
      `--file=${outFile}.tmp`,
      '--owner=0',
      '--group=0',
      '--numeric-owner',
      `--directory=${work}`,
      'manifest.json',
      `${imageId}.json`,
      layerDigest,
    ]);
    renameSync(`${outFile}.tmp`, outFile);
    return imageId;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
