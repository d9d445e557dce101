// An infrastructure provider stand-in for the tests, in the role CAPD plays with containers: it
// honours Cluster API's contracts for its LocalCluster, LocalControlPlane and LocalMachine objects,
// and it boots each Machine as a real node on this host (test/e2e/realnode) by running the
// Machine's bootstrap data: the cloud-config's files and its `kubeadm join` (cloud-init.ts). Then,
// as CAPD does, it sets the Node's spec.providerID as the admin and reports the LocalMachine
// provisioned with it, which is how Cluster API's Machine controller finds the Node.
//   - LocalCluster: status.initialization.provisioned (spec.controlPlaneEndpoint is the test's);
//   - LocalControlPlane: status.initialization.controlPlaneInitialized (the local control plane runs);
//   - LocalMachine: a finalizer; the boot once the Machine has its bootstrap data; on deletion,
//     the node torn down, then the finalizer gone. `e2e.nodeflavor.io/hold` (from the template's
//     metadata) keeps a machine from booting, as a slow cloud would.
import type { Logger } from 'pino';
import { parse } from 'yaml';
import { kubeJson } from '../../../src/runtime/fetch.ts';
import type { KubeConfig } from '../../../src/runtime/kubeconfig.ts';
import { ListWatch, objectKey } from '../../../src/runtime/listwatch.ts';
import { WorkQueue } from '../../../src/runtime/queue.ts';
import { parseJoinConfiguration } from '../kubelet-sim/join-config.ts';
import { SimulatedKubelet } from '../kubelet-sim/kubelet.ts';
import type { RealNodeHost } from '../realnode/real-node.ts';
import { parseBootstrapData } from './cloud-init.ts';
import { CONTROL_PLANE_GROUP, INFRA_GROUP, LOCAL_VERSION } from './local-provider-crds.ts';

export const HOLD_ANNOTATION = 'e2e.nodeflavor.io/hold';
const FINALIZER = 'e2e.nodeflavor.io/local-machine';

interface LocalObject {
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    annotations?: Record<string, string>;
    finalizers?: string[];
    deletionTimestamp?: string;
    ownerReferences?: { kind: string; name: string }[];
  };
  spec?: { providerID?: string };
  status?: { initialization?: { provisioned?: boolean; controlPlaneInitialized?: boolean } };
}

const path = (group: string, plural: string, namespace?: string, name?: string) =>
  `/apis/${group}/${LOCAL_VERSION}${namespace ? `/namespaces/${namespace}` : ''}/${plural}${name ? `/${name}` : ''}`;

/** What a test may ask of a booted node. */
export interface BootedMachine {
  /** Tears the node down (its kubelet and whatever else runs it). */
  stop: () => Promise<void>;
  /** The bootstrap data as the Machine got it (the test replays it elsewhere). */
  bootstrapData: string;
}

export class LocalProvider {
  private readonly kubeConfig: KubeConfig;
  /** Real nodes on this host; without one (no root: the demo), simulated kubelets join instead. */
  private readonly host: RealNodeHost | undefined;
  private readonly log: Logger;
  private readonly caches: ListWatch<LocalObject>[];
  private readonly queue: WorkQueue;
  /** Booted (or booting) machines by namespace/name of their LocalMachine. */
  readonly booted = new Map<string, Promise<BootedMachine>>();
  /** Why a machine could not boot (the test's failure message shows it). */
  readonly failures = new Map<string, string>();

  constructor(options: { kubeConfig: KubeConfig; host: RealNodeHost | undefined; log: Logger }) {
    this.kubeConfig = options.kubeConfig;
    this.host = options.host;
    this.log = options.log;
    this.queue = new WorkQueue({
      name: 'local-provider',
      concurrency: 4,
      maxDelayMs: 5_000,
      reconcile: (key) => this.reconcile(key),
      onError: (key, error) => this.log.warn({ key, err: error.message }, 'local provider: retrying'),
    });
    const watch = (group: string, plural: string) =>
      new ListWatch<LocalObject>({
        kubeConfig: this.kubeConfig,
        path: path(group, plural),
        onEvent: (_type, object) => this.queue.add(`${plural}/${objectKey(object)}`),
      });
    this.caches = [
      watch(INFRA_GROUP, 'localclusters'),
      watch(CONTROL_PLANE_GROUP, 'localcontrolplanes'),
      watch(INFRA_GROUP, 'localmachines'),
    ];
  }

  async start(): Promise<void> {
    await Promise.all(this.caches.map((cache) => cache.start()));
    this.queue.start();
  }

  /** Stops reconciling, then every machine it booted (real nodes go with their host too). */
  async stop(): Promise<void> {
    this.queue.stop();
    for (const cache of this.caches) cache.stop();
    for (const booted of this.booted.values()) await booted.then((b) => b.stop()).catch(() => undefined);
    this.booted.clear();
  }

  private cache(plural: string): ListWatch<LocalObject> {
    const index = ['localclusters', 'localcontrolplanes', 'localmachines'].indexOf(plural);
    return this.caches[index] as ListWatch<LocalObject>;
  }

  private async reconcile(key: string): Promise<void> {
    const [plural = '', objectKeyPart] = [key.slice(0, key.indexOf('/')), key.slice(key.indexOf('/') + 1)];
    const object = this.cache(plural).get(objectKeyPart);
    if (!object) return;
    if (plural === 'localclusters' && object.status?.initialization?.provisioned !== true)
      await this.patchStatus(INFRA_GROUP, plural, object, { initialization: { provisioned: true } });
    if (plural === 'localcontrolplanes' && object.status?.initialization?.controlPlaneInitialized !== true)
      await this.patchStatus(CONTROL_PLANE_GROUP, plural, object, {
        initialization: { controlPlaneInitialized: true },
      });
    if (plural === 'localmachines') await this.reconcileMachine(objectKeyPart, object);
  }

  private async reconcileMachine(key: string, machine: LocalObject): Promise<void> {
    const { namespace, name } = machine.metadata;
    const finalizers = machine.metadata.finalizers ?? [];
    if (machine.metadata.deletionTimestamp) {
      const booted = this.booted.get(key);
      if (booted) {
        this.booted.delete(key);
        await booted.then((b) => b.stop()).catch(() => undefined);
      }
      if (finalizers.includes(FINALIZER))
        await this.patch(path(INFRA_GROUP, 'localmachines', namespace, name), {
          metadata: { finalizers: finalizers.filter((f) => f !== FINALIZER) },
        });
      return;
    }
    if (!finalizers.includes(FINALIZER)) {
      await this.patch(path(INFRA_GROUP, 'localmachines', namespace, name), {
        metadata: { finalizers: [...finalizers, FINALIZER] },
      });
      return;
    }
    if (machine.metadata.annotations?.[HOLD_ANNOTATION] === 'true') return;
    if (machine.status?.initialization?.provisioned === true || this.booted.has(key)) return;
    const owner = machine.metadata.ownerReferences?.find((o) => o.kind === 'Machine');
    if (!owner) return; // Cluster API sets it; its update brings us back
    const capiMachine = await kubeJson<{ spec: { bootstrap?: { dataSecretName?: string } } }>(
      this.kubeConfig,
      'GET',
      `/apis/cluster.x-k8s.io/v1beta2/namespaces/${namespace}/machines/${owner.name}`,
    );
    const dataSecretName = capiMachine.spec.bootstrap?.dataSecretName;
    if (!dataSecretName) {
      // The Machine gets it once its bootstrap data exists (never, while nodeflavor holds it paused).
      this.queue.addAfter(`localmachines/${key}`, 1_000);
      return;
    }
    const secret = await kubeJson<{ data: { value: string } }>(
      this.kubeConfig,
      'GET',
      `/api/v1/namespaces/${namespace}/secrets/${dataSecretName}`,
    );
    const bootstrapData = Buffer.from(secret.data.value, 'base64').toString('utf8');
    const boot = this.boot(owner.name, bootstrapData).then(async (booted) => {
      await this.provisioned(machine, owner.name);
      return booted;
    });
    this.booted.set(key, boot);
    boot.catch((error: Error) => {
      this.failures.set(key, error.message);
      this.log.warn({ machine: key, err: error.message }, 'local provider: the machine did not boot');
    });
  }

  /** Runs bootstrap data on a new real node named `nodeName`: its files and its kubeadm join. */
  async boot(nodeName: string, bootstrapData: string): Promise<BootedMachine> {
    const bootstrap = parseBootstrapData(bootstrapData);
    const join = parse(bootstrap.joinConfiguration) as { discovery?: { file?: { kubeConfigPath?: string } } };
    const discoveryPath = join.discovery?.file?.kubeConfigPath;
    for (const file of bootstrap.files)
      if (file.path !== discoveryPath)
        throw new Error(`write_files ${file.path}: the stand-in places only the discovery kubeconfig`);
    const discoveryKubeconfig = bootstrap.files.find((f) => f.path === discoveryPath)?.content;
    if (!this.host) {
      // A simulated kubelet (kubelet-sim) reads the same files and makes the same requests.
      const kubelet = new SimulatedKubelet(nodeName, parseJoinConfiguration(bootstrap.joinConfiguration), {
        timeoutMs: 60_000,
        readFile: (path) => (path === discoveryPath ? discoveryKubeconfig : undefined),
      });
      await kubelet.join();
      return { stop: async () => kubelet.stop(), bootstrapData };
    }
    const node = await this.host.startNode({
      name: nodeName,
      joinConfiguration: bootstrap.joinConfiguration,
      ...(discoveryKubeconfig === undefined ? {} : { discoveryKubeconfig }),
    });
    await node.joined();
    return { stop: () => node.stop(), bootstrapData };
  }

  /** As CAPD does: the Node's providerID (kubelet left it empty), then the LocalMachine provisioned. */
  private async provisioned(machine: LocalObject, nodeName: string): Promise<void> {
    const providerID = `local:///${machine.metadata.namespace}/${machine.metadata.name}`;
    const deadline = Date.now() + 60_000;
    for (;;) {
      try {
        await kubeJson(this.kubeConfig, 'PATCH', `/api/v1/nodes/${nodeName}`, {
          contentType: 'application/merge-patch+json',
          body: { spec: { providerID } },
        });
        break;
      } catch (error) {
        // kubeadm join exits before the kubelet registered its Node (FACTS.md).
        if ((error as { status?: number }).status !== 404 || Date.now() > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    const { namespace, name } = machine.metadata;
    await this.patch(path(INFRA_GROUP, 'localmachines', namespace, name), { spec: { providerID } });
    await this.patchStatus(INFRA_GROUP, 'localmachines', machine, {
      initialization: { provisioned: true },
      addresses: [{ type: 'Hostname', address: nodeName }],
    });
  }

  private async patch(url: string, body: object): Promise<void> {
    await kubeJson(this.kubeConfig, 'PATCH', url, { contentType: 'application/merge-patch+json', body });
  }

  private async patchStatus(
    group: string,
    plural: string,
    object: LocalObject,
    status: object,
  ): Promise<void> {
    const { namespace, name } = object.metadata;
    await this.patch(`${path(group, plural, namespace, name)}/status`, { status });
  }
}
