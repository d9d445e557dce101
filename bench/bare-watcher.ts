// The floor for P1: a watcher that does the least a controller could — see each new Node and
// patch one label onto it — using the same list/watch and the same HTTP client as nodeflavor.
//   node bench/bare-watcher.ts --kubeconfig PATH --prefix NAME-PREFIX
import { parseArgs } from 'node:util';
import { type TrimmedNode, trimNode } from '../src/kube/node-writes.ts';
import { loadKubeConfig } from '../src/runtime/config.ts';
import { kubeJson } from '../src/runtime/fetch.ts';
import { ListWatch } from '../src/runtime/listwatch.ts';
import { WorkQueue } from '../src/runtime/queue.ts';
import { SEEN_LABEL } from './bare-watcher-label.ts';

const { values } = parseArgs({ options: { kubeconfig: { type: 'string' }, prefix: { type: 'string' } } });
const kubeConfig = loadKubeConfig(values.kubeconfig);
const prefix = values.prefix ?? '';

const queue = new WorkQueue({
  name: 'bare',
  concurrency: 8,
  reconcile: async (name) => {
    await kubeJson(kubeConfig, 'PATCH', `/api/v1/nodes/${name}`, {
      contentType: 'application/merge-patch+json',
      body: { metadata: { labels: { [SEEN_LABEL]: 'true' } } },
    });
  },
});
const nodes = new ListWatch<TrimmedNode>({
  kubeConfig,
  path: '/api/v1/nodes',
  transform: trimNode,
  onEvent: (type, node) => {
    if (type === 'ADDED' && node.metadata.name.startsWith(prefix) && !node.metadata.labels?.[SEEN_LABEL])
      queue.add(node.metadata.name);
  },
});
await nodes.start();
queue.start();
console.log('ready');
process.on('SIGTERM', () => process.exit(0));
