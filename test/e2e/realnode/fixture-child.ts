// A process that starts one real node running a static Pod and then waits to be killed: the
// cleanup test SIGKILLs it and checks the node left nothing behind. Prints "ready <host dir>".

import { createBootstrapToken, joinConfiguration } from '../support/bootstrap.ts';
import { loadEnvironment } from '../support/environment.ts';
import { PAUSE_IMAGE, RealNodeHost } from './real-node.ts';

const kubeconfig = process.env.E2E_KUBECONFIG ?? '';
const name = process.argv[2] ?? 'cleanup-1';
const env = await loadEnvironment(kubeconfig);
const host = await RealNodeHost.start(env.server);
const token = await createBootstrapToken(env);
await host.startNode({
  name,
  joinConfiguration: joinConfiguration(env, token.token),
  staticPods: [
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'sleeper', namespace: 'default' },
      spec: { containers: [{ name: 'sleeper', image: PAUSE_IMAGE, imagePullPolicy: 'Never' }] },
    },
  ],
});
process.stdout.write(`ready ${host.dir}\n`);
setInterval(() => undefined, 1 << 30);
