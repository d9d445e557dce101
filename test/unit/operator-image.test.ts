// The Dockerfile is the one description of the operator image: the real-node tests assemble the
// image without Docker by carrying it out (test/e2e/realnode/operator-image.ts). These checks hold
// that reader to the Dockerfile, so the two cannot drift silently.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { imageConfigJson } from '../e2e/realnode/docker-archive.ts';
import { finalStageConfig, parseDockerfile } from '../e2e/realnode/dockerfile.ts';
import { operatorImageConfig, readDockerfile } from '../e2e/realnode/operator-image.ts';

const dockerfile = readFileSync(join(import.meta.dirname, '..', '..', 'Dockerfile'), 'utf8');
const chartValues = readFileSync(
  join(import.meta.dirname, '..', '..', 'deploy/helm/nodeflavor/values.yaml'),
  'utf8',
);

describe('the operator image assembled without Docker', () => {
  it('has exactly the config the Dockerfile gives the final stage', () => {
    const { final } = readDockerfile();
    const config = JSON.parse(imageConfigJson(operatorImageConfig(final), '0'.repeat(64))).config;
    // Each value read straight from the Dockerfile text, independently of the reader.
    const line = (keyword: string) =>
      dockerfile
        .split('\n')
        .filter((l) => l.startsWith(`${keyword} `))
        .at(-1)
        ?.slice(keyword.length + 1);
    assert.deepEqual(config.Entrypoint, JSON.parse(line('ENTRYPOINT') ?? ''));
    assert.deepEqual(config.Cmd, JSON.parse(line('CMD') ?? ''));
    assert.equal(config.User, line('USER'));
    assert.equal(config.WorkingDir, line('WORKDIR'));
    assert.ok(config.Env.includes(line('ENV')));
    assert.deepEqual(
      Object.keys(config.ExposedPorts),
      (line('EXPOSE') ?? '').split(' ').map((p) => `${p}/tcp`),
    );
  });

  it('copies every final-stage COPY --from from a stage the Dockerfile defines', () => {
    const { stages, final } = readDockerfile();
    assert.ok(final.copies.length >= 3);
    for (const copy of final.copies) {
      assert.ok(
        stages.some((s) => s.name === copy.from),
        `COPY --from=${copy.from}`,
      );
    }
    assert.deepEqual(
      final.copies.flatMap((c) => c.sources),
      ['/app/package.json', '/app/node_modules', '/app/dist'],
    );
  });

  it('refuses a final-stage instruction it cannot reproduce, rather than build something else', () => {
    const drifted = `${dockerfile}\nRUN echo hello > /etc/motd\n`;
    assert.throws(
      () => finalStageConfig(parseDockerfile(drifted)),
      /RUN in the final stage is not reproduced/,
    );
  });

  it('runs as the non-root user the chart expects', () => {
    const { final } = readDockerfile();
    assert.equal(final.user, '65532:65532');
    assert.match(chartValues, /repository: nodeflavor/);
  });
});
