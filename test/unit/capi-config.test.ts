import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CapiConfigSchema, parseCapiConfig } from '../../src/capi/config.ts';
import { settingsFlagParser } from '../../src/cli/run-flags.ts';

const parseFlags = settingsFlagParser(CapiConfigSchema.shape);
const configOf = (args: string[], env: NodeJS.ProcessEnv = {}) => parseCapiConfig(parseFlags(args, env));

describe('nodeflavor capi configuration', () => {
  test('defaults: its own namespace and Lease, 24h tokens, a poll every 10 s', () => {
    const config = configOf([]);
    assert.equal(config.namespace, 'nodeflavor-capi');
    assert.equal(config.leaderElect, true);
    assert.equal(config.leaderElectionId, 'nodeflavor-capi');
    assert.equal(config.tokenTtl, '24h');
    assert.equal(config.statusPollInterval, 10_000);
    assert.equal(config.workers, 4);
  });

  test('flags, NODEFLAVOR_ variables and POD_NAMESPACE, flags first', () => {
    const config = configOf(['--token-ttl=2h30m', '--no-leader-elect', '--status-poll-interval=1s'], {
      NODEFLAVOR_TOKEN_TTL: '1h',
      NODEFLAVOR_WORKERS: '8',
      POD_NAMESPACE: 'capi-system',
    });
    assert.equal(config.tokenTtl, '2h30m');
    assert.equal(config.leaderElect, false);
    assert.equal(config.statusPollInterval, 1000);
    assert.equal(config.workers, 8);
    assert.equal(config.namespace, 'capi-system');
  });

  const refused: Record<string, { args: string[]; message: RegExp }> = {
    'a ttl the issuer would not read': {
      args: ['--token-ttl=1d'],
      message: /--token-ttl: must be a duration/,
    },
    'a poll faster than 200ms': {
      args: ['--status-poll-interval=50ms'],
      message: /--status-poll-interval: must be at least 200ms/,
    },
    'a renew deadline not under the lease duration': {
      args: ['--leader-elect-renew-deadline=20s'],
      message: /--leader-elect-renew-deadline: must be shorter than --leader-elect-lease-duration/,
    },
  };
  for (const [name, { args, message }] of Object.entries(refused))
    test(`refused: ${name}`, () => assert.throws(() => configOf(args), message));

  test('a flag of nodeflavor run is not one of nodeflavor capi', () => {
    assert.throws(() => parseFlags(['--admission-mode=policy'], {}), /unknown flag --admission-mode/);
  });
});
