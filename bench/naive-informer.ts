// The P4 comparison: a plain client-node informer over full Node objects, as a controller
// written without trimming would keep them. Prints "synced N" once its list is in.
//   node bench/naive-informer.ts --kubeconfig PATH
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig, makeInformer, type V1Node } from '@kubernetes/client-node';

const { values } = parseArgs({ options: { kubeconfig: { type: 'string' } } });
const kc = new KubeConfig();
kc.loadFromFile(values.kubeconfig ?? '');
const core = kc.makeApiClient(CoreV1Api);
const informer = makeInformer<V1Node>(kc, '/api/v1/nodes', () => core.listNode());
informer.on('error', (error) => console.error(`informer error: ${String(error)}`));
await informer.start();
console.log(`synced ${informer.list().length}`);
process.on('SIGTERM', () => process.exit(0));
setInterval(() => {}, 1 << 30);
