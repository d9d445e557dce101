// The P5 floor: a fresh process that only lists what the controller lists at start, as the
// controller lists it (the same kubeconfig reading and HTTP stack from src/kube, the same pages:
// Nodes in pages of 100, FlavoredTokens in pages of 500, the kubelet CSRs and the FlavorClasses,
// all at once), parses every page and keeps nothing. Prints one JSON line (counts, time, its CPU)
// and exits.
// --item-parse: parse each page item by item as the controller does (src/runtime/list-page.ts) instead
// of whole (undici's response.json()), for a second floor that shares that saving.
//   node bench/bare-list.ts --kubeconfig PATH [--item-parse]
import { parseArgs } from 'node:util';
import { loadKubeConfig } from '../src/runtime/config.ts';
import { kubeFetch } from '../src/runtime/fetch.ts';
import { parseListPage } from '../src/runtime/list-page.ts';

const { values } = parseArgs({
  options: { kubeconfig: { type: 'string' }, 'item-parse': { type: 'boolean', default: false } },
});
const kubeConfig = loadKubeConfig(values.kubeconfig);

async function list(path: string, pageSize: number, fieldSelector?: string): Promise<number> {
  let count = 0;
  let continueToken: string | undefined;
  do {
    const response = await kubeFetch(kubeConfig, path, {
      query: { limit: pageSize, continue: continueToken, fieldSelector },
      headers: { Accept: 'application/json' },
    });
    if (response.status !== 200) throw new Error(`list ${path}: HTTP ${response.status}`);
    const page = values['item-parse']
      ? parseListPage(await response.text(), (raw) => raw)
      : ((await response.json()) as { metadata?: { continue?: string }; items?: unknown[] });
    count += page.items?.length ?? 0;
    continueToken = page.metadata?.continue || undefined;
  } while (continueToken);
  return count;
}

const started = performance.now();
const [nodes, tokens, csrs, classes] = await Promise.all([
  list('/api/v1/nodes', 100),
  list('/apis/nodeflavor.io/v1alpha1/flavoredtokens', 500),
  list(
    '/apis/certificates.k8s.io/v1/certificatesigningrequests',
    500,
    'spec.signerName=kubernetes.io/kube-apiserver-client-kubelet',
  ),
  list('/apis/nodeflavor.io/v1alpha1/flavorclasses', 500),
]);
const cpu = process.cpuUsage();
console.log(
  JSON.stringify({
    nodes,
    tokens,
    csrs,
    classes,
    listMs: performance.now() - started,
    // The whole process's CPU (start-up included), to compare with the restarted operator's.
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
  }),
);
process.exit(0);
