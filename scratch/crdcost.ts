// How much API-server CPU a FlavoredToken create costs against a Secret create, and against the same
// CRD without its CEL rules (a copy in another group), at concurrency 32.
import { readFileSync } from 'node:fs';
import { execSync } from 'node:child_process';
import { parse, stringify } from 'yaml';
import { kubeJson } from '../src/kube/fetch.ts';
import { kubeConfigFromFile } from '../src/kube/kubeconfig.ts';

const kc = kubeConfigFromFile('.cluster/kubeconfig');
const pids = ['kube-apiserver', 'kube-controller', 'etcd'].map((n) => Number(execSync(`pgrep ${n} | head -1`).toString().trim()));
const cpuMs = (pid: number) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
};
const crd = parse(readFileSync('deploy/crds/nodeflavor.io_flavoredtokens.yaml', 'utf8'));
const stripRules = (o: unknown): unknown => {
  if (Array.isArray(o)) return o.map(stripRules);
  if (o && typeof o === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(o)) if (k !== 'x-kubernetes-validations') out[k] = stripRules(v);
    return out;
  }
  return o;
};
const variant = (group: string, rules: boolean) => {
  const c = structuredClone(rules ? crd : stripRules(crd)) as any;
  c.metadata.name = `flavoredtokens.${group}`;
  c.spec.group = group;
  return c;
};
for (const [g, r] of [['rules.bench.io', true], ['norules.bench.io', false]] as const) {
  await kubeJson(kc, 'POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', { body: variant(g, r) }).catch(() => undefined);
}
await new Promise((r) => setTimeout(r, 3000));
const N = Number(process.env.N ?? 2000);
async function run(label: string, make: (i: number) => [string, object] | Promise<[string, object]>) {
  const before = pids.map(cpuMs);
  const self0 = process.cpuUsage();
  const t0 = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (next < N) { const i = next++; const [path, body] = await make(i); if (path) await kubeJson(kc, 'POST', path, { body }); }
  }));
  const ms = performance.now() - t0;
  const used = pids.map((p, i) => ((cpuMs(p) - before[i]!) / N).toFixed(2));
  const self = process.cpuUsage(self0);
  console.log(`${label}: ${(N / (ms / 1000)).toFixed(0)}/s; CPU ms per item: apiserver ${used[0]}, kcm ${used[1]}, etcd ${used[2]}, client ${((self.user + self.system) / 1000 / N).toFixed(2)}`);
}
const token = (group: string, i: number, extra: boolean) => ({
  apiVersion: `${group}/v1alpha1`, kind: 'FlavoredToken',
  metadata: { name: `ft-${group.slice(0, 2)}${i}`, labels: { 'nodeflavor.io/token-id': `a${i}` },
    ...(extra ? { finalizers: ['nodeflavor.io/revoke'], annotations: { 'nodeflavor.io/requested-by': 'system:serviceaccount:p3-portal:portal', 'nodeflavor.io/owner': 'x'.repeat(43) } } : {}) },
  spec: { flavorClassName: 'p3-bench', maxUses: 1, ttl: '24h' },
});
const tag = process.env.TAG ?? 'a';
await run('secret', (i) => ['/api/v1/namespaces/default/secrets', { apiVersion: 'v1', kind: 'Secret', metadata: { name: `s${tag}${i}` }, type: 'Opaque', stringData: { a: 'b', c: 'd', e: 'f', g: 'h' } }]);
for (const [g] of [['rules.bench.io'], ['norules.bench.io']]) {
  await run(`${g} full`, (i) => [`/apis/${g}/v1alpha1/flavoredtokens`, token(g, Number(`${i}`) + (tag === 'a' ? 0 : 100000), true)]);
}
await run('protocol: record then owned Secret', async (i) => {
  const rec = await kubeJson<{ metadata: { uid: string; name: string } }>(kc, 'POST', '/apis/nodeflavor.io/v1alpha1/flavoredtokens', { body: token('nodeflavor.io', i + 200000 + (tag === 'a' ? 0 : 100000), true) });
  return ['/api/v1/namespaces/default/secrets', { apiVersion: 'v1', kind: 'Secret', metadata: { name: `p${tag}${i}`, ownerReferences: [{ apiVersion: 'nodeflavor.io/v1alpha1', kind: 'FlavoredToken', name: rec.metadata.name, uid: rec.metadata.uid }] }, type: 'Opaque', stringData: { a: 'b', c: 'd', e: 'f', g: 'h' } }];
});
await run('nodeflavor.io full', (i) => ['/apis/nodeflavor.io/v1alpha1/flavoredtokens', token('nodeflavor.io', i + (tag === 'a' ? 0 : 100000), true)]);
