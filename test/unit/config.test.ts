import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseRunFlags, UsageError } from '../../src/cli/run-flags.ts';
import {
  type Config,
  ConfigSchema,
  controllerUsername,
  issuerConfigFor,
  kebab,
  parseConfig,
} from '../../src/config.ts';
import {
  AttestationSettingsSchema,
  AttestationTotalBucketSchema,
  AuthFailureBucketSchema,
  CallerBucketSchema,
  ConnectionsSchema,
  IssuanceSettingsSchema,
  parseIssuerConfig,
  TrustedProxiesSchema,
} from '../../src/tokenissuer/config.ts';

/** What `nodeflavor run <args>` ends up with, given an environment. */
const configOf = (args: string[], env: NodeJS.ProcessEnv = {}): Config =>
  parseConfig(parseRunFlags(args, env));

describe('config defaults', () => {
  test('no flags and no environment give the documented defaults', () => {
    assert.deepEqual(configOf([]), {
      namespace: 'nodeflavor',
      serviceAccount: 'nodeflavor',
      controller: true,
      trustedNodeLabels: [
        'node-role.kubernetes.io/control-plane',
        'node-restriction.kubernetes.io/nodeflavor-system',
      ],
      allowUntrustedNode: false,
      allowUnguardedNodes: false,
      webhook: true,
      issuer: true,
      leaderElect: true,
      leaderElectionId: 'nodeflavor-controller',
      leaderElectLeaseDuration: 10_000,
      leaderElectRenewDeadline: 7_000,
      leaderElectRetryPeriod: 2_000,
      kubeRequestTimeout: 30_000,
      metricsAddress: ':8080',
      keySecret: 'nodeflavor-hmac-keys',
      bootstrapGroup: 'system:bootstrappers:nodeflavor',
      csrApprover: true,
      bindingGrace: 30_000,
      verifiedEvents: false,
      capiSyncedLabelPatterns: [],
      capiSyncedAnnotationPatterns: [],
      orphanGrace: 120_000,
      claimGrace: 3_600_000,
      resync: 600_000,
      workers: 16,
      adminGroups: [],
      admissionMode: 'webhook',
      webhookAddress: ':9443',
      webhookService: 'nodeflavor-webhook',
      webhookConfigName: 'nodeflavor',
      tlsMode: 'self',
      tlsSecret: 'nodeflavor-webhook-tls',
      issuerAddress: ':8443',
      issuerAuth: 'tokenreview',
      issuerAudience: 'nodeflavor-issuer',
      jwtFlavorsClaim: 'nodeflavor.io/flavors',
      issuerTlsSecret: 'nodeflavor-issuer-tls',
      issuerCaConfigMap: 'nodeflavor-issuer-ca',
      issuerService: 'nodeflavor-issuer',
      joinDiscovery: 'file',
      attestationBurst: 100,
      attestationPerSecond: 20,
      issuerHeadersTimeout: 10_000,
      issuerRequestTimeout: 15_000,
      issuerIdleTimeout: 65_000,
      issuerMaxConnectionsPerAddress: 32,
      issuerMaxConnections: 1_024,
      issuerTrustedProxies: [],
      issuerAuthFailureBurst: 20,
      issuerAuthFailuresPerSecond: 1,
      issuerCallerBurst: 30,
      issuerCallerPerSecond: 1,
      issuerPortal: false,
      logLevel: 'info',
    });
  });

  test('environment variables unrelated to nodeflavor are ignored', () => {
    assert.deepEqual(configOf([], { HOME: '/root', NAMESPACE: 'x', CONTROLLER: 'false' }), configOf([]));
  });
});

describe('boolean flags', () => {
  const booleans: Record<string, { key: keyof Config; byDefault: boolean }> = {
    controller: { key: 'controller', byDefault: true },
    webhook: { key: 'webhook', byDefault: true },
    issuer: { key: 'issuer', byDefault: true },
    'leader-elect': { key: 'leaderElect', byDefault: true },
    'csr-approver': { key: 'csrApprover', byDefault: true },
    'allow-unguarded-nodes': { key: 'allowUnguardedNodes', byDefault: false },
  };
  const forms: Record<string, { args: (flag: string) => string[]; want: boolean | 'default' }> = {
    absent: { args: () => [], want: 'default' },
    '--x': { args: (f) => [`--${f}`], want: true },
    '--no-x': { args: (f) => [`--no-${f}`], want: false },
    '--x=true': { args: (f) => [`--${f}=true`], want: true },
    '--x=false': { args: (f) => [`--${f}=false`], want: false },
    '--no-x then --x: the last wins': { args: (f) => [`--no-${f}`, `--${f}`], want: true },
    '--x then --no-x: the last wins': { args: (f) => [`--${f}`, `--no-${f}`], want: false },
  };
  for (const [flag, b] of Object.entries(booleans)) {
    for (const [form, c] of Object.entries(forms)) {
      test(`--${flag}: ${form}`, () => {
        const want = c.want === 'default' ? b.byDefault : c.want;
        assert.equal(configOf(c.args(flag))[b.key], want);
      });
    }
  }

  test('a boolean flag does not swallow the next argument', () => {
    const config = configOf(['--no-csr-approver', '--namespace', 'ops']);
    assert.equal(config.csrApprover, false);
    assert.equal(config.namespace, 'ops');
  });

  // `--leader-elect=yes` (or NODEFLAVOR_LEADER_ELECT=1) silently turns leader election OFF: two
  // replicas would then both reconcile. Only true/false should be accepted.
  const notBooleans: Record<string, { args: string[]; env?: NodeJS.ProcessEnv }> = {
    '--leader-elect=yes': { args: ['--leader-elect=yes'] },
    '--leader-elect=1': { args: ['--leader-elect=1'] },
    '--no-webhook=false (a double negative)': { args: ['--no-webhook=false'] },
    'NODEFLAVOR_LEADER_ELECT=1': { args: [], env: { NODEFLAVOR_LEADER_ELECT: '1' } },
    'NODEFLAVOR_WEBHOOK=TRUE': { args: [], env: { NODEFLAVOR_WEBHOOK: 'TRUE' } },
  };
  for (const [name, c] of Object.entries(notBooleans)) {
    test(`a value other than true/false is refused: ${name}`, {}, () => {
      assert.throws(() => configOf(c.args, c.env ?? {}), /leader-elect|webhook|true|false/);
    });
  }
});

describe('--admin-group', () => {
  const cases: Record<string, { args: string[]; env?: NodeJS.ProcessEnv; want: string[]; todo?: string }> = {
    'repeated: every group, in order': {
      args: ['--admin-group', 'ops', '--admin-group=sre', '--admin-group', 'platform'],
      want: ['ops', 'sre', 'platform'],
    },
    '--admin-groups is an alias': { args: ['--admin-groups', 'ops'], want: ['ops'] },
    'from NODEFLAVOR_ADMIN_GROUPS, comma separated': {
      args: [],
      env: { NODEFLAVOR_ADMIN_GROUPS: 'ops,sre' },
      want: ['ops', 'sre'],
    },
    'flags replace the environment': {
      args: ['--admin-group', 'platform'],
      env: { NODEFLAVOR_ADMIN_GROUPS: 'ops,sre' },
      want: ['platform'],
    },
  };
  for (const [name, c] of Object.entries(cases)) {
    test(name, { todo: c.todo }, () => {
      assert.deepEqual(configOf(c.args, c.env ?? {}).adminGroups, c.want);
    });
  }

  const forbidden = [
    'system:authenticated',
    'system:unauthenticated',
    'system:serviceaccounts',
    'system:nodes',
  ];
  for (const group of forbidden) {
    test(`the broad group ${group} is refused, with a message`, () => {
      assert.throws(
        () => configOf(['--admin-group', 'ops', '--admin-group', group]),
        (error: Error) => {
          assert.match(error.message, /--admin-groups: admin groups may not be broad system groups/);
          assert.match(error.message, new RegExp(group));
          return true;
        },
      );
    });
    test(`the broad group ${group} is refused from the environment too`, () => {
      assert.throws(() => configOf([], { NODEFLAVOR_ADMIN_GROUPS: `ops,${group}` }), /broad system groups/);
    });
  }

  // Every bootstrap token authenticates with this group: its holders are exactly the untrusted
  // node administrators the operator guards against, so it must never be an admin group.
  for (const group of ['system:bootstrappers', 'system:bootstrappers:kubeadm:default-node-token']) {
    test(`the bootstrap token group ${group} is refused`, {}, () => {
      assert.throws(() => configOf(['--admin-group', group]), /admin groups/);
    });
  }

  test('a group needs a value', () => {
    assert.throws(
      () => parseRunFlags(['--admin-group'], {}),
      (error: unknown) => error instanceof UsageError && error.message === '--admin-group needs a value',
    );
  });
});

describe('environment', () => {
  const cases: Record<string, { args?: string[]; env: NodeJS.ProcessEnv; want: Partial<Config> }> = {
    'NODEFLAVOR_* strings': {
      env: {
        NODEFLAVOR_NAMESPACE: 'ops',
        NODEFLAVOR_SERVICE_ACCOUNT: 'nf',
        NODEFLAVOR_ADMISSION_MODE: 'both',
        NODEFLAVOR_METRICS_ADDRESS: '127.0.0.1:9090',
        NODEFLAVOR_JWT_JWKS_FILE: '/etc/jwks.json',
        NODEFLAVOR_WEBHOOK_URL: 'https://127.0.0.1:9443/validate',
      },
      want: {
        namespace: 'ops',
        serviceAccount: 'nf',
        admissionMode: 'both',
        metricsAddress: '127.0.0.1:9090',
        jwtJwksFile: '/etc/jwks.json',
        webhookUrl: 'https://127.0.0.1:9443/validate',
      },
    },
    'NODEFLAVOR_* booleans, numbers and durations': {
      env: {
        NODEFLAVOR_LEADER_ELECT: 'false',
        NODEFLAVOR_CSR_APPROVER: 'false',
        NODEFLAVOR_WORKERS: '3',
        NODEFLAVOR_BINDING_GRACE: '5m',
      },
      want: { leaderElect: false, csrApprover: false, workers: 3, bindingGrace: 300_000 },
    },
    'POD_NAMESPACE sets the namespace': {
      env: { POD_NAMESPACE: 'kube-ops' },
      want: { namespace: 'kube-ops' },
    },
    'NODEFLAVOR_NAMESPACE wins over POD_NAMESPACE': {
      env: { POD_NAMESPACE: 'kube-ops', NODEFLAVOR_NAMESPACE: 'ops' },
      want: { namespace: 'ops' },
    },
    'a flag wins over NODEFLAVOR_NAMESPACE and POD_NAMESPACE': {
      args: ['--namespace', 'flagged'],
      env: { POD_NAMESPACE: 'kube-ops', NODEFLAVOR_NAMESPACE: 'ops' },
      want: { namespace: 'flagged' },
    },
    'flags win over the environment, for every kind of setting': {
      args: [
        '--leader-elect',
        '--no-csr-approver',
        '--workers',
        '5',
        '--binding-grace=1h',
        '--log-level',
        'warn',
      ],
      env: {
        NODEFLAVOR_LEADER_ELECT: 'false',
        NODEFLAVOR_CSR_APPROVER: 'true',
        NODEFLAVOR_WORKERS: '3',
        NODEFLAVOR_BINDING_GRACE: '5m',
        NODEFLAVOR_LOG_LEVEL: 'debug',
      },
      want: { leaderElect: true, csrApprover: false, workers: 5, bindingGrace: 3_600_000, logLevel: 'warn' },
    },
  };
  for (const [name, c] of Object.entries(cases)) {
    test(name, () => {
      const config = configOf(c.args ?? [], c.env);
      for (const [key, value] of Object.entries(c.want)) {
        assert.deepEqual(config[key as keyof Config], value, key);
      }
    });
  }

  test('a bad environment value names the flag it stands for', () => {
    assert.throws(() => configOf([], { NODEFLAVOR_RESYNC: 'often' }), /--resync: a duration/);
    assert.throws(() => configOf([], { NODEFLAVOR_WORKERS: 'many' }), /--workers:/);
  });
});

describe('usage errors', () => {
  const cases: Record<string, { args: string[]; message: string }> = {
    'an unknown flag': { args: ['--bogus'], message: 'unknown flag --bogus' },
    'an unknown flag with a value': { args: ['--bogus=1'], message: 'unknown flag --bogus' },
    'an unknown flag after good ones': {
      args: ['--namespace', 'ops', '--frobnicate'],
      message: 'unknown flag --frobnicate',
    },
    '--no- on a flag that is not a boolean': {
      args: ['--no-namespace'],
      message: 'unknown flag --no-namespace',
    },
    'a misspelt boolean': { args: ['--no-webhooks'], message: 'unknown flag --no-webhooks' },
    'a positional argument': { args: ['extra'], message: 'unexpected argument "extra"' },
    'a single-dash flag': { args: ['-n', 'ops'], message: 'unexpected argument "-n"' },
    'a flag without its value': { args: ['--namespace'], message: '--namespace needs a value' },
  };
  for (const [name, c] of Object.entries(cases)) {
    test(name, () => {
      assert.throws(
        () => parseRunFlags(c.args, {}),
        (error: unknown) => {
          assert.ok(error instanceof UsageError, String(error));
          assert.equal(error.message, c.message);
          return true;
        },
      );
    });
  }
});

describe('values checked by the schema', () => {
  const durationFlags = ['binding-grace', 'orphan-grace', 'resync'] as const;
  const durations: Record<string, number> = {
    '500ms': 500,
    '30s': 30_000,
    '5m': 300_000,
    '1h': 3_600_000,
    '0s': 0,
    '90s': 90_000,
  };
  for (const flag of durationFlags) {
    const key = flag === 'resync' ? 'resync' : flag === 'binding-grace' ? 'bindingGrace' : 'orphanGrace';
    for (const [text, ms] of Object.entries(durations)) {
      if (flag === 'resync' && ms < 1000) continue; // --resync has a 1s minimum (tested below)
      test(`--${flag} ${text} is ${ms} ms`, () => {
        assert.equal(configOf([`--${flag}`, text])[key], ms);
      });
    }
    for (const bad of ['10', '1.5s', '5d', '-1s', '1h30m', '5 m', 'soon', '']) {
      test(`--${flag} ${JSON.stringify(bad)} is refused, naming the flag`, () => {
        assert.throws(
          () => configOf([`--${flag}=${bad}`]),
          new RegExp(`^Error: invalid configuration: .*--${flag}: a duration like 500ms, 30s, 5m or 1h`),
        );
      });
    }
  }

  test('--resync 0s is refused', {}, () => {
    assert.throws(() => configOf(['--resync', '0s']), /--resync/);
  });

  const invalid: Record<string, { args: string[]; message: RegExp }> = {
    'workers 0': { args: ['--workers', '0'], message: /--workers:/ },
    'workers 65': { args: ['--workers', '65'], message: /--workers:/ },
    'workers not a number': { args: ['--workers', 'lots'], message: /--workers:/ },
    'workers 1.5': { args: ['--workers', '1.5'], message: /--workers:/ },
    'an unknown admission mode': { args: ['--admission-mode', 'cel'], message: /--admission-mode:/ },
    'an unknown log level': { args: ['--log-level', 'trace'], message: /--log-level:/ },
    'a metrics address without a port': {
      args: ['--metrics-address', 'localhost'],
      message: /--metrics-address:/,
    },
    'an empty namespace': { args: ['--namespace='], message: /--namespace:/ },
    'a bootstrap group outside system:bootstrappers': {
      args: ['--bootstrap-group', 'system:masters'],
      message: /--bootstrap-group:/,
    },
    'a webhook URL that is not a URL': { args: ['--webhook-url', 'not a url'], message: /--webhook-url:/ },
    'several bad values: each named': {
      args: ['--workers', '0', '--resync', 'x'],
      message: /--resync: .*; --workers: |--workers: .*; --resync: /,
    },
  };
  for (const [name, c] of Object.entries(invalid)) {
    test(name, () => {
      assert.throws(() => configOf(c.args), c.message);
    });
  }

  test('addresses: :port, host:port and [ipv6]:port are accepted', () => {
    assert.equal(configOf(['--metrics-address', ':9090']).metricsAddress, ':9090');
    assert.equal(configOf(['--webhook-address', '0.0.0.0:9443']).webhookAddress, '0.0.0.0:9443');
    assert.equal(configOf(['--issuer-address', '[::1]:8443']).issuerAddress, '[::1]:8443');
  });
});

describe('issuer limits', () => {
  test('timeouts are durations, caps and budgets numbers', () => {
    const config = configOf([
      '--issuer-headers-timeout',
      '5s',
      '--issuer-request-timeout=20s',
      '--issuer-idle-timeout',
      '2m',
      '--issuer-max-connections-per-address',
      '8',
      '--issuer-max-connections=100',
      '--issuer-auth-failure-burst',
      '5',
      '--issuer-auth-failures-per-second',
      '0.5',
      '--issuer-caller-burst',
      '60',
      '--issuer-caller-per-second',
      '2',
    ]);
    assert.equal(config.issuerHeadersTimeout, 5_000);
    assert.equal(config.issuerRequestTimeout, 20_000);
    assert.equal(config.issuerIdleTimeout, 120_000);
    assert.equal(config.issuerMaxConnectionsPerAddress, 8);
    assert.equal(config.issuerMaxConnections, 100);
    assert.equal(config.issuerAuthFailureBurst, 5);
    assert.equal(config.issuerAuthFailuresPerSecond, 0.5);
    assert.equal(config.issuerCallerBurst, 60);
    assert.equal(config.issuerCallerPerSecond, 2);
  });

  test('trusted proxies: comma separated, as a flag or in NODEFLAVOR_ISSUER_TRUSTED_PROXIES', () => {
    assert.deepEqual(configOf(['--issuer-trusted-proxies', '10.0.0.0/8, fd00::/8']).issuerTrustedProxies, [
      '10.0.0.0/8',
      'fd00::/8',
    ]);
    assert.deepEqual(
      configOf([], { NODEFLAVOR_ISSUER_TRUSTED_PROXIES: '192.168.1.10,192.168.1.11' }).issuerTrustedProxies,
      ['192.168.1.10', '192.168.1.11'],
    );
    assert.throws(() => configOf(['--issuer-trusted-proxies', 'ingress-nginx']), /--issuer-trusted-proxies/);
  });

  test('a headers timeout longer than the request timeout, or a per-address cap over the total, is refused', () => {
    assert.throws(
      () => configOf(['--issuer-headers-timeout', '30s']),
      /--issuer-headers-timeout: must not be longer than --issuer-request-timeout/,
    );
    assert.throws(
      () => configOf(['--issuer-max-connections', '10']),
      /--issuer-max-connections-per-address: must not be larger than --issuer-max-connections/,
    );
    assert.throws(() => configOf(['--issuer-auth-failure-burst', '0']), /--issuer-auth-failure-burst/);
  });
});

describe('controllerUsername', () => {
  const cases: Record<string, { args: string[]; want: string }> = {
    'by default': { args: [], want: 'system:serviceaccount:nodeflavor:nodeflavor' },
    'with --namespace and --service-account': {
      args: ['--namespace', 'ops', '--service-account', 'nf-controller'],
      want: 'system:serviceaccount:ops:nf-controller',
    },
  };
  for (const [name, c] of Object.entries(cases)) {
    test(name, () => {
      assert.equal(controllerUsername(configOf(c.args)), c.want);
    });
  }

  test('with POD_NAMESPACE', () => {
    assert.equal(
      controllerUsername(configOf([], { POD_NAMESPACE: 'infra' })),
      'system:serviceaccount:infra:nodeflavor',
    );
  });
});

describe('kebab', () => {
  test('turns config keys into flag names', () => {
    assert.equal(kebab('leaderElectionId'), 'leader-election-id');
    assert.equal(kebab('namespace'), 'namespace');
  });
});

describe('--join-discovery', () => {
  test('file by default; token from the flag or NODEFLAVOR_JOIN_DISCOVERY', () => {
    assert.equal(configOf([]).joinDiscovery, 'file');
    assert.equal(configOf(['--join-discovery', 'token']).joinDiscovery, 'token');
    assert.equal(configOf([], { NODEFLAVOR_JOIN_DISCOVERY: 'token' }).joinDiscovery, 'token');
  });

  test('anything else is refused', () => {
    assert.throws(() => configOf(['--join-discovery', 'https']), /joinDiscovery|join-discovery/);
  });
});

describe('flags read by parseArgs, from a table derived from ConfigSchema', () => {
  test('every setting is a flag and a NODEFLAVOR_ variable, with no list kept by hand', () => {
    for (const key of Object.keys(ConfigSchema.shape)) {
      const flag = `--${kebab(key)}`;
      const envName = `NODEFLAVOR_${kebab(key).replace(/-/g, '_').toUpperCase()}`;
      const isBoolean = typeof parseConfig({})[key as keyof Config] === 'boolean';
      const args = isBoolean ? [flag] : [`${flag}=x`];
      assert.ok(key in parseRunFlags(args, {}), `${flag} sets ${key}`);
      assert.ok(key in parseRunFlags([], { [envName]: isBoolean ? 'true' : 'x' }), `${envName} sets ${key}`);
    }
  });

  test('values take the type of their setting: booleans, numbers, comma lists and text', () => {
    const raw = parseRunFlags(
      [
        '--no-webhook',
        '--workers=3',
        '--issuer-caller-per-second',
        '0.5',
        '--issuer-trusted-proxies=10.0.0.1, ::1',
      ],
      { NODEFLAVOR_ISSUER_HEADERS_TIMEOUT: '5s' },
    );
    assert.deepEqual(raw, {
      webhook: false,
      workers: 3,
      issuerCallerPerSecond: 0.5,
      issuerTrustedProxies: ['10.0.0.1', '::1'],
      issuerHeadersTimeout: '5s',
    });
  });

  test('a Cluster API sync pattern is one per flag (a comma inside it stays) and must be a regular expression', () => {
    assert.deepEqual(
      configOf(['--capi-synced-label-pattern=^a{1,3}/', '--capi-synced-label-pattern', 'b'])
        .capiSyncedLabelPatterns,
      ['^a{1,3}/', 'b'],
    );
    assert.throws(() => configOf(['--capi-synced-annotation-pattern=(']), /"\(" is not a regular expression/);
  });

  test('the first --admin-group replaces the environment list; later ones, under either name, add in order', () => {
    const env = { NODEFLAVOR_ADMIN_GROUPS: 'from-env' };
    assert.deepEqual(
      parseRunFlags(['--admin-group', 'a', '--admin-groups=b', '--admin-group=c,d'], env).adminGroups,
      ['a', 'b', 'c,d'],
      'one group per use: a flag value is not split at commas',
    );
    assert.deepEqual(parseRunFlags([], env).adminGroups, ['from-env']);
  });

  test('a list that is not repeatable: the last flag wins, as for any other setting', () => {
    const raw = parseRunFlags(
      ['--issuer-trusted-proxies=10.0.0.1', '--issuer-trusted-proxies=10.0.0.2,10.0.0.3'],
      {},
    );
    assert.deepEqual(raw.issuerTrustedProxies, ['10.0.0.2', '10.0.0.3']);
  });

  test('env then flag, for each kind of setting', () => {
    const env = {
      NODEFLAVOR_WEBHOOK: 'false',
      NODEFLAVOR_WORKERS: '3',
      NODEFLAVOR_ISSUER_TRUSTED_PROXIES: '10.0.0.1',
      NODEFLAVOR_ISSUER_IDLE_TIMEOUT: '2m',
    };
    assert.deepEqual(
      pick(configOf([], env), ['webhook', 'workers', 'issuerTrustedProxies', 'issuerIdleTimeout']),
      { webhook: false, workers: 3, issuerTrustedProxies: ['10.0.0.1'], issuerIdleTimeout: 120_000 },
    );
    const flags = ['--webhook', '--workers=4', '--issuer-trusted-proxies=::1', '--issuer-idle-timeout=90s'];
    assert.deepEqual(
      pick(configOf(flags, env), ['webhook', 'workers', 'issuerTrustedProxies', 'issuerIdleTimeout']),
      { webhook: true, workers: 4, issuerTrustedProxies: ['::1'], issuerIdleTimeout: 90_000 },
    );
  });

  const usage: Record<string, { args: string[]; message: string }> = {
    'a value that looks like a flag is not taken as the value': {
      args: ['--namespace', '--no-webhook'],
      message: '--namespace needs a value',
    },
    'a negated flag with a value': { args: ['--no-webhook=false'], message: '--no-webhook takes no value' },
    'a boolean with a value other than true or false': {
      args: ['--issuer-portal=on'],
      message: '--issuer-portal must be true or false, not "on"',
    },
    'arguments after --': {
      args: ['--', '--namespace=ops'],
      message: 'unexpected argument "--namespace=ops"',
    },
    'grouped short flags': { args: ['-abc'], message: 'unexpected argument "-abc"' },
  };
  for (const [name, c] of Object.entries(usage)) {
    test(`usage error: ${name}`, () => {
      assert.throws(
        () => parseRunFlags(c.args, {}),
        (error: unknown) => error instanceof UsageError && error.message === c.message,
      );
    });
  }
});

describe('the issuer settings of nodeflavor run are the issuer library’s', () => {
  const serving = { listen: { port: 8443 }, tls: { certPem: 'x', keyPem: 'y' } };

  test('a JWT-mode config that skipped the schema’s rules is refused, never run with an empty issuer', () => {
    const unchecked = { ...configOf([]), issuerAuth: 'jwt' as const, jwtAudience: 'nodeflavor' };
    assert.throws(() => issuerConfigFor(unchecked, serving), /--issuer-auth=jwt needs --jwt-issuer/);
  });

  test('the library defaults shared into every issuer config cannot be changed through one', () => {
    const config = issuerConfigFor(configOf([]), serving);
    assert.throws(() => {
      (config.idempotency as { ttlSeconds: number }).ttlSeconds = 1;
    }, TypeError);
  });

  test('every issuer default reached via nodeflavor run equals the library’s default', () => {
    assert.deepEqual(issuerConfigFor(configOf([]), serving), parseIssuerConfig({ tls: serving.tls }));
  });

  test('the flags map onto the configuration the library parses from the same settings', () => {
    const config = configOf([
      '--namespace=ops',
      '--key-secret=ring',
      '--bootstrap-group=system:bootstrappers:ops',
      '--join-discovery=token',
      '--join-api-server-endpoint=api.example.com:6443',
      '--issuer-auth=jwt',
      '--jwt-issuer=https://idp.example.com',
      '--jwt-audience=nodeflavor',
      '--jwt-secret-file=/etc/hs256',
      '--jwt-flavors-claim=flavors',
      '--issuer-headers-timeout=1500ms',
      '--issuer-request-timeout=20s',
      '--issuer-idle-timeout=2m',
      '--issuer-max-connections-per-address=8',
      '--issuer-max-connections=100',
      '--issuer-trusted-proxies=10.0.0.0/8',
      '--issuer-auth-failure-burst=5',
      '--issuer-auth-failures-per-second=0.5',
      '--issuer-caller-burst=60',
      '--issuer-caller-per-second=2',
      '--issuer-portal',
      '--log-level=warn',
    ]);
    const viaRun = issuerConfigFor(config, { ...serving, listen: { host: '127.0.0.1', port: 9443 } });
    const library = parseIssuerConfig({
      listen: { host: '127.0.0.1', port: 9443 },
      tls: serving.tls,
      issuance: {
        authExtraGroups: 'system:bootstrappers:ops',
        discovery: 'token',
        apiServerEndpoint: 'api.example.com:6443',
      },
      keyRing: { namespace: 'ops', secretName: 'ring' },
      auth: {
        tokenReview: { enabled: false },
        jwt: {
          issuer: 'https://idp.example.com',
          audience: 'nodeflavor',
          hs256SecretFile: '/etc/hs256',
          flavorsClaim: 'flavors',
        },
      },
      connections: {
        headersTimeoutSeconds: 1.5,
        requestTimeoutSeconds: 20,
        idleTimeoutSeconds: 120,
        maxPerAddress: 8,
        max: 100,
      },
      trustedProxies: ['10.0.0.0/8'],
      rateLimit: {
        perCaller: { capacity: 60, refillPerSecond: 2 },
        unauthenticatedPerAddress: { capacity: 5, refillPerSecond: 0.5 },
      },
      portal: { enabled: true },
      logLevel: 'warn',
    });
    assert.deepEqual(viaRun, library);
  });

  test('each issuer flag is checked by the very schema the library uses', () => {
    const { shape } = ConfigSchema;
    assert.equal(shape.issuerMaxConnections, ConnectionsSchema.shape.max);
    assert.equal(shape.issuerMaxConnectionsPerAddress, ConnectionsSchema.shape.maxPerAddress);
    assert.equal(shape.issuerCallerBurst, CallerBucketSchema.shape.capacity);
    assert.equal(shape.issuerCallerPerSecond, CallerBucketSchema.shape.refillPerSecond);
    assert.equal(shape.issuerAuthFailureBurst, AuthFailureBucketSchema.shape.capacity);
    assert.equal(shape.issuerAuthFailuresPerSecond, AuthFailureBucketSchema.shape.refillPerSecond);
    assert.equal(shape.issuerTrustedProxies, TrustedProxiesSchema);
    assert.equal(shape.attestationBurst, AttestationTotalBucketSchema.shape.capacity);
    assert.equal(shape.attestationPerSecond, AttestationTotalBucketSchema.shape.refillPerSecond);
    assert.equal(shape.tpmManufacturerCrlFile, AttestationSettingsSchema.shape.manufacturerCrlFile);
    assert.equal(shape.bootstrapGroup, IssuanceSettingsSchema.shape.authExtraGroups);
    assert.equal(shape.joinDiscovery, IssuanceSettingsSchema.shape.discovery);
  });

  // A value the library would refuse is refused at start-up (exit 2), naming the flag, rather
  // than leaving the issuer unable to start in a running process.
  const refused: Record<string, { args: string[]; message: RegExp }> = {
    'a headers timeout over the library’s 5m': {
      args: ['--issuer-headers-timeout=6m', '--issuer-request-timeout=10m'],
      message: /--issuer-headers-timeout: must be at most 5m/,
    },
    'a request timeout over 10m': {
      args: ['--issuer-request-timeout=11m'],
      message: /--issuer-request-timeout:/,
    },
    'an idle timeout over 1h': {
      args: ['--issuer-idle-timeout=2h'],
      message: /--issuer-idle-timeout: must be at most 1h/,
    },
    'a timeout under 100ms': { args: ['--issuer-idle-timeout=50ms'], message: /must be at least 100ms/ },
    'a timeout that is no duration': {
      args: ['--issuer-idle-timeout=65'],
      message: /--issuer-idle-timeout: a duration like 500ms, 30s, 5m or 1h/,
    },
    'a caller burst over 100000': {
      args: ['--issuer-caller-burst=100001'],
      message: /--issuer-caller-burst:/,
    },
    'an empty audience': { args: ['--issuer-audience='], message: /--issuer-audience:/ },
    'an empty key secret': { args: ['--key-secret='], message: /--key-secret:/ },
    'a bootstrap group outside system:bootstrappers, in the library’s words': {
      args: ['--bootstrap-group=system:nodes'],
      message: /--bootstrap-group: must match system:bootstrappers:/,
    },
    'jwt without an issuer, an audience or a key file': {
      args: ['--issuer-auth=jwt'],
      message:
        /--jwt-issuer: required with --issuer-auth jwt; --jwt-audience: required with --issuer-auth jwt; --jwt-jwks-file: set exactly one of/,
    },
    'jwt with both key files': {
      args: [
        '--issuer-auth=jwt',
        '--jwt-issuer=i',
        '--jwt-audience=a',
        '--jwt-jwks-file=/k',
        '--jwt-secret-file=/s',
      ],
      message:
        /^Error: invalid configuration: --jwt-jwks-file: set exactly one of --jwt-jwks-file and --jwt-secret-file/,
    },
  };
  for (const [name, c] of Object.entries(refused)) {
    test(`refused: ${name}`, () => {
      assert.throws(() => configOf(c.args), c.message);
    });
  }

  test('jwt key files and claims are not required without --issuer-auth jwt', () => {
    assert.equal(configOf([]).jwtIssuer, undefined);
    assert.equal(
      configOf(['--issuer-auth=jwt', '--jwt-issuer=i', '--jwt-audience=a', '--jwt-jwks-file=/k']).issuerAuth,
      'jwt',
    );
  });
});

function pick<K extends keyof Config>(config: Config, keys: K[]): Pick<Config, K> {
  return Object.fromEntries(keys.map((key) => [key, config[key]])) as Pick<Config, K>;
}
