// What each of the issuance's writes costs the control plane, against the one write of the P3
// floor (a bootstrap-token Secret create): API server, etcd and kube-controller-manager CPU per
// write (from /proc), and writes/s, at concurrency 32 from one client, as the issuer's
// ServiceAccount. The writes: a Secret create; a FlavoredToken create as the issuer writes it; the
// issued mark (a merge patch of a FlavoredToken); both FlavoredToken writes again into a copy of
// the CRD without its CEL rules (what the rules cost); and a merge patch of a Secret (an update of
// the cheap kind, for contrast). Why P3's three writes sit far below 0.4x the raw Secret creates
// where these processes share two cores.
//   node --import tsx bench/p3-write-cost.ts [--scale quick]
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Pool } from 'undici';
import { parse } from 'yaml';
import { bootstrapSecretName, randomString, TOKEN_ALPHABET } from '../src/flavor/bootstrap-token.ts';
import { FLAVORED_TOKEN_PLURAL, GROUP, VERSION } from '../src/flavor/resources.ts';
import { kubeJson } from '../src/runtime/fetch.ts';
import { flavoredTokenName } from '../src/tokenissuer/issuance/issue.ts';
import { applyObjects } from '../test/e2e/cluster/apply.ts';
import { prepareOperatorIdentity } from '../test/e2e/support/chart.ts';
import { e2eEnvironment } from '../test/e2e/support/environment.ts';
import { waitFor } from '../test/e2e/support/wait.ts';
import { type Figure, figure, log, mapLimit, runStandalone, type Scale } from './lib.ts';
import { BASELINE_LABEL, baselineSecret, issuedMark, post, protocolRecord, send } from './p3-issuance.ts';
import { controlPlanePids, ProcessCpu } from './profiling.ts';

const CONCURRENCY = 32;
/** A copy of the FlavoredToken CRD without its x-kubernetes-validations, in a group of its own. */
const NO_RULES_GROUP = 'norules.bench.nodeflavor.io';
const SECRETS = '/api/v1/namespaces/kube-system/secrets';
const RECORDS = `/apis/${GROUP}/${VERSION}/${FLAVORED_TOKEN_PLURAL}`;
const NO_RULES_RECORDS = `/apis/${NO_RULES_GROUP}/${VERSION}/${FLAVORED_TOKEN_PLURAL}`;

function withoutRules(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutRules);
  if (!value || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([key]) => key !== 'x-kubernetes-validations')
      .map(([key, item]) => [key, withoutRules(item)]),
  );
}

function noRulesCrd(): object {
  const crd = withoutRules(
    parse(
      readFileSync(
        join(import.meta.dirname, '..', 'deploy', 'crds', `${GROUP}_${FLAVORED_TOKEN_PLURAL}.yaml`),
        'utf8',
      ),
    ),
  ) as { metadata: { name: string }; spec: { group: string } };
  crd.metadata.name = `${FLAVORED_TOKEN_PLURAL}.${NO_RULES_GROUP}`;
  crd.spec.group = NO_RULES_GROUP;
  return crd;
}

type Arm =
  | 'secret create'
  | 'FlavoredToken create'
  | 'FlavoredToken create, no CEL rules'
  | 'issued mark'
  | 'issued mark, no CEL rules'
  | 'Secret merge patch';
const ARMS: Arm[] = [
  'secret create',
  'FlavoredToken create',
  'FlavoredToken create, no CEL rules',
  'issued mark',
  'issued mark, no CEL rules',
  'Secret merge patch',
];

export async function runWriteCost(scale: Scale): Promise<Figure[]> {
  const perHalf = scale === 'quick' ? 300 : 1500;
  const env = await e2eEnvironment();
  // The chart's CRDs, admission policies and ServiceAccount: the writes are made as the issuer
  // makes them (its token, HTTP/1.1 keep-alive, as P3's floor), plus what the bench's extra arms need.
  const { install, kubeConfig: operatorKubeConfig } = await prepareOperatorIdentity(env);
  const token = operatorKubeConfig.getCurrentUser()?.token;
  if (!token) throw new Error('the operator kubeconfig carries no token');
  await applyObjects(
    env.kubeconfigPath,
    [
      noRulesCrd(),
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: 'p3-write-cost' },
        rules: [
          { apiGroups: [NO_RULES_GROUP], resources: [FLAVORED_TOKEN_PLURAL], verbs: ['create', 'patch'] },
          { apiGroups: [''], resources: ['secrets'], verbs: ['patch'] },
        ],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: 'p3-write-cost' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'p3-write-cost' },
        subjects: [{ kind: 'ServiceAccount', name: install.serviceAccount, namespace: install.namespace }],
      },
    ],
    'nodeflavor-bench',
  );
  await waitFor(
    () =>
      kubeJson(env.kubeConfig, 'GET', NO_RULES_RECORDS, { query: { limit: 1 } }).then(
        () => true,
        () => false,
      ),
    { what: `the ${NO_RULES_GROUP} copy of the CRD to serve`, timeoutMs: 60_000 },
  );
  const pids = controlPlanePids(env.kubeconfigPath);
  const cpu = new ProcessCpu(pids);
  const rates = new Map<Arm, number[]>();
  const pool = new Pool(new URL(env.server).origin, {
    connections: CONCURRENCY,
    pipelining: 1,
    allowH2: false,
    connect: { ca: env.caPem },
  });
  const write = (method: 'POST' | 'PATCH', path: string, body: string) =>
    method === 'POST'
      ? post(pool, path, token, body, `POST ${path}`)
      : send(
          pool,
          { method, path, contentType: 'application/merge-patch+json', expected: 200 },
          token,
          body,
          `PATCH ${path}`,
        );
  const ids = () => Array.from({ length: perHalf }, () => randomString(TOKEN_ALPHABET, 6, randomBytes));

  try {
    // A first pass warms every path up (connections, CEL programs, caches) and is not counted.
    for (let half = -1; half < 2; half++) {
      const secretIds = ids();
      const recordIds = ids();
      const noRulesIds = ids();
      const bodies: Record<Arm, (index: number) => Promise<unknown>> = {
        'secret create': (i) => write('POST', SECRETS, baselineSecret(secretIds[i])),
        'FlavoredToken create': (i) => write('POST', RECORDS, protocolRecord(recordIds[i] as string)),
        'FlavoredToken create, no CEL rules': (i) =>
          write(
            'POST',
            NO_RULES_RECORDS,
            protocolRecord(noRulesIds[i] as string, `${NO_RULES_GROUP}/${VERSION}`),
          ),
        'issued mark': (i) =>
          write('PATCH', `${RECORDS}/${flavoredTokenName(recordIds[i] as string)}`, issuedMark()),
        'issued mark, no CEL rules': (i) =>
          write('PATCH', `${NO_RULES_RECORDS}/${flavoredTokenName(noRulesIds[i] as string)}`, issuedMark()),
        'Secret merge patch': (i) =>
          write(
            'PATCH',
            `${SECRETS}/${bootstrapSecretName(secretIds[i] as string)}`,
            JSON.stringify({ metadata: { annotations: { 'bench.nodeflavor.io/touched': `${half}` } } }),
          ),
      };
      for (const arm of ARMS) {
        const before = cpu.snapshot();
        const started = performance.now();
        await mapLimit(
          Array.from({ length: perHalf }, (_, i) => i),
          CONCURRENCY,
          (i) => bodies[arm](i),
        );
        const seconds = (performance.now() - started) / 1000;
        if (half < 0) continue;
        cpu.add(arm, before, cpu.snapshot(), perHalf);
        rates.set(arm, [...(rates.get(arm) ?? []), perHalf / seconds]);
        log(
          `P3 writes, half ${half + 1}: ${arm}: ${(perHalf / seconds).toFixed(0)}/s; CPU per write ${cpu.perUnit(arm)}`,
        );
      }
    }
  } finally {
    await pool.close();
    // What the bench wrote (labelled) and what it made, in that order; each delete on its own.
    const selector = { labelSelector: BASELINE_LABEL };
    for (const [path, query] of [
      [SECRETS, selector],
      [RECORDS, selector],
      [NO_RULES_RECORDS, selector],
      [`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${FLAVORED_TOKEN_PLURAL}.${NO_RULES_GROUP}`],
      ['/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/p3-write-cost'],
      ['/apis/rbac.authorization.k8s.io/v1/clusterroles/p3-write-cost'],
    ] as const)
      await kubeJson(env.kubeConfig, 'DELETE', path, { query }).catch(() => undefined);
  }

  const apiServerMs = (arm: Arm) => cpu.perUnitOf(arm, 'kube-apiserver') * 1000;
  const rate = (arm: Arm) => {
    const halves = rates.get(arm) ?? [];
    return halves.reduce((a, b) => a + b, 0) / Math.max(1, halves.length);
  };
  const secret = apiServerMs('secret create');
  const figures: Figure[] = ARMS.map((arm) =>
    figure({
      name: `P3 write cost: kube-apiserver CPU per ${arm}, concurrency ${CONCURRENCY}`,
      value: apiServerMs(arm),
      unit: 'ms',
      baseline: arm === 'secret create' ? null : secret,
      baselineName: arm === 'secret create' ? null : 'Secret create',
      goal: '–',
      met: true,
      notes: `${rate(arm).toFixed(0)} writes/s from one client; CPU per write: ${cpu.perUnit(arm)}`,
    }),
  );
  const issuance = apiServerMs('FlavoredToken create') + secret + apiServerMs('issued mark');
  figures.push(
    figure({
      name: `P3 write cost: kube-apiserver CPU of the issuance's three writes, concurrency ${CONCURRENCY}`,
      value: issuance,
      unit: 'ms',
      baseline: secret,
      baselineName: 'Secret create',
      goal: '–',
      met: true,
      notes: `a FlavoredToken create, a Secret create and the issued mark: where the API server's CPU sets the pace, P3's ratio to the raw Secret creates is at most about the inverse of this one (before etcd, kube-controller-manager's garbage collector and the issuer)`,
    }),
  );
  return figures;
}

if (import.meta.main) await runStandalone(runWriteCost);
