// Real nodes on this host, as a test fixture: each is a real containerd, `kubeadm join` and
// kubelet (the pinned release) in a private mount namespace of its own, joined with a
// JoinConfiguration (nodeflavor-issued or plain kubeadm). Several run side by side: distinct node
// names, kubelet ports, pod subnets and containerd state. Everything they create goes away when
// stop() is called, and also when the test process dies (the scripts tear down when their stdin
// closes): processes, mounts, cni0, the iptables rules, cgroups, temp dirs.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { KUBERNETES_SERVICE_IP, NETWORKING } from '../cluster/controlplane.ts';
import { freePort } from '../cluster/ports.ts';
import { startJanitor } from '../cluster/process.ts';
import { nodeBinaryPaths } from '../cluster/versions.ts';
import { type BuiltImage, buildPauseImage } from './operator-image.ts';

const here = dirname(fileURLToPath(import.meta.url));
/**
 * One set of real nodes per host at a time (cni0, the DNAT rule and pod subnets are host-wide):
 * RealNodeHost holds flock(1) on this directory for its lifetime, and a second suite on the same
 * host waits. A directory that exists wherever real nodes run, so the lock leaves no file behind.
 */
export const HOST_LOCK = '/usr/lib/cni';
const HOST_LOCK_WAIT_S = 900;
/** Set by a caller that already holds HOST_LOCK (the cleanup test), so its nodes do not wait on it. */
export const HOST_LOCK_HELD_ENV = 'NODEFLAVOR_REAL_NODES_LOCK_HELD';
export const PAUSE_IMAGE = 'registry.k8s.io/pause:3.10.2';
const HOST_PACKAGES: Record<string, string> = {
  containerd: '/usr/bin/containerd',
  runc: '/usr/sbin/runc',
  'containernetworking-plugins': '/usr/lib/cni/bridge',
  iptables: '/usr/sbin/iptables',
  conntrack: '/usr/sbin/conntrack',
  iproute2: '/usr/sbin/ip',
};

/** Why real nodes cannot run here, or undefined when they can. */
export function realNodesUnsupported(): string | undefined {
  if (process.env.NODEFLAVOR_REAL_NODES === '0') return 'NODEFLAVOR_REAL_NODES=0 is set';
  if (process.platform !== 'linux') return 'real nodes need Linux';
  if (process.getuid?.() !== 0) return 'real nodes need root (mounts, cgroups, cni0, iptables)';
  for (const [name, path] of Object.entries(HOST_PACKAGES)) {
    if (!existsSync(path))
      return `${path} is missing: run 'make tools' as root (installs the Debian package ${name})`;
  }
  for (const path of Object.values(nodeBinaryPaths())) {
    if (!existsSync(path)) return `${path} is missing: run 'make binaries'`;
  }
  return undefined;
}

function requireSupport(): void {
  const reason = realNodesUnsupported();
  if (reason) throw new Error(reason);
}

/** A line-oriented child: stdin is its lifeline and command channel, stdout its events. */
class Lifeline {
  private readonly child: ChildProcess;
  private readonly seen: { name: string; detail: string }[] = [];
  private readonly waiters = new Set<() => void>();
  readonly exited: Promise<number | null>;
  private done = false;

  constructor(command: string, args: string[], env: NodeJS.ProcessEnv, stderrLog: string) {
    this.child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], env });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      const match = /^(?:event )?(\S+)\s*(.*)$/.exec(line);
      if (match?.[1]) this.seen.push({ name: match[1], detail: match[2] ?? '' });
      for (const wake of this.waiters) wake();
    });
    this.child.stderr?.on('data', (chunk: Buffer) => writeFileSync(stderrLog, chunk, { flag: 'a' }));
    this.exited = new Promise((resolve) =>
      this.child.on('exit', (code) => {
        this.done = true;
        for (const wake of this.waiters) wake();
        resolve(code);
      }),
    );
  }

  /** Waits for the next event named `name` after the first `skip` of them; throws on exit or deadline. */
  async event(name: string, timeoutMs: number, skip = 0): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.seen.filter((e) => e.name === name)[skip];
      if (found) return found.detail;
      const failed = this.seen.find((e) => e.name === 'failed');
      if (failed) throw new Error(failed.detail);
      if (this.done) throw new Error(`exited before '${name}'`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no '${name}' within ${timeoutMs / 1000} s`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        const wake = () => {
          clearTimeout(timer);
          this.waiters.delete(wake);
          resolve();
        };
        this.waiters.add(wake);
      });
    }
  }

  last(name: string): string | undefined {
    return this.seen.filter((e) => e.name === name).at(-1)?.detail;
  }

  count(name: string): number {
    return this.seen.filter((e) => e.name === name).length;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  send(command: string): void {
    this.child.stdin?.write(`${command}\n`);
  }

  async close(): Promise<void> {
    this.child.stdin?.end();
    await this.exited;
  }
}

export interface RealNodeOptions {
  /** The node name (kubeadm's nodeRegistration.name; set when the JoinConfiguration lacks one). */
  name: string;
  /** A JoinConfiguration YAML (kubeadm.k8s.io/v1beta4), as the issuer or an admin wrote it. */
  joinConfiguration: string;
  /**
   * The discovery kubeconfig a file-discovery JoinConfiguration reads (discovery.file.kubeConfigPath):
   * placed at exactly that path in the node's own /etc/kubernetes before `kubeadm join` runs.
   */
  discoveryKubeconfig?: string;
  /** Static Pod manifests the kubelet runs from /etc/kubernetes/manifests (no scheduler involved). */
  staticPods?: object[];
}

export class RealNode {
  readonly name: string;
  readonly dir: string;
  readonly kubeletPort: number;
  private readonly lifeline: Lifeline;
  private readonly janitor: { release: () => void };

  constructor(
    name: string,
    dir: string,
    kubeletPort: number,
    lifeline: Lifeline,
    janitor: { release: () => void },
  ) {
    this.name = name;
    this.dir = dir;
    this.kubeletPort = kubeletPort;
    this.lifeline = lifeline;
    this.janitor = janitor;
  }

  /** Waits for `kubeadm join` to exit 0 ("This node has joined the cluster"); throws with its log otherwise. */
  async joined(timeoutMs = 120_000): Promise<void> {
    const rc = await this.lifeline.event('kubeadm-exited', timeoutMs).catch((error: Error) => {
      throw new Error(`${this.name}: ${error.message}\n${this.logTail()}`);
    });
    if (rc !== '0') throw new Error(`${this.name}: kubeadm join exited ${rc}\n${this.logTail()}`);
  }

  /** Stops and starts the kubelet with its own credentials, as `systemctl restart kubelet` would. */
  async restartKubelet(timeoutMs = 60_000): Promise<void> {
    const started = this.lifeline.count('kubelet-started');
    this.lifeline.send('restart-kubelet');
    await this.lifeline.event('kubelet-started', timeoutMs, started);
  }

  /**
   * The kubelet's client certificate and key (PEM, one file), read through /proc/PID/root: it lives
   * on a tmpfs in the node's own mount namespace. A test uses it to act as this node's kubelet.
   */
  kubeletClientPem(): string {
    const pid = this.lifeline.last('kubelet-started');
    if (!pid) throw new Error(`${this.name}: the kubelet never started`);
    // The file is a symlink with an absolute target, which must be resolved inside that root too.
    const root = `/proc/${pid}/root`;
    const link = `${root}/var/lib/kubelet/pki/kubelet-client-current.pem`;
    const target = readlinkSync(link);
    return readFileSync(target.startsWith('/') ? `${root}${target}` : link, 'utf8');
  }

  /** The last lines of kubeadm's, the kubelet's and containerd's logs, for failure messages. */
  logTail(lines = 25): string {
    return ['node.log', 'kubeadm.log', 'kubelet.log', 'containerd.log']
      .map((file) => {
        const path = join(this.dir, file);
        if (!existsSync(path)) return '';
        const text = readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
        return `--- ${this.name} ${file}\n${text}`;
      })
      .filter(Boolean)
      .join('\n');
  }

  async stop(): Promise<void> {
    await this.lifeline.close();
    this.janitor.release();
  }
}

/**
 * The host side shared by a test's real nodes (cni0, the drop-everything-leaving rule, the API
 * server for pods) and the images every node imports. Start one per test file; stop() stops its
 * nodes too.
 */
export class RealNodeHost {
  readonly dir: string;
  private readonly network: Lifeline;
  private readonly janitor: { release: () => void };
  private readonly images: BuiltImage[];
  private readonly nodes: RealNode[] = [];
  private nextIndex = 1;

  private constructor(
    dir: string,
    network: Lifeline,
    janitor: { release: () => void },
    images: BuiltImage[],
  ) {
    this.dir = dir;
    this.network = network;
    this.janitor = janitor;
    this.images = images;
  }

  /** `server` is the API server's URL on 127.0.0.1; `images` are imported into every node. */
  static async start(server: string, images: BuiltImage[] = []): Promise<RealNodeHost> {
    requireSupport();
    const dir = mkdtempSync(join(tmpdir(), 'nodeflavor-nodes-'));
    const janitor = startJanitor(dir);
    const port = new URL(server).port;
    const script = ['bash', join(here, 'host-network.sh'), port, KUBERNETES_SERVICE_IP];
    const locked = process.env[HOST_LOCK_HELD_ENV] === '1';
    const network = locked
      ? new Lifeline(script[0] ?? 'bash', script.slice(1), process.env, join(dir, 'host-network.log'))
      : new Lifeline(
          'flock',
          ['--exclusive', '--wait', String(HOST_LOCK_WAIT_S), HOST_LOCK, ...script],
          process.env,
          join(dir, 'host-network.log'),
        );
    try {
      await network.event('ready', (HOST_LOCK_WAIT_S + 30) * 1000);
    } catch (error) {
      await network.close();
      janitor.release();
      throw new Error(`host network: ${(error as Error).message}: ${readLog(join(dir, 'host-network.log'))}`);
    }
    const pause = buildPauseImage(nodeBinaryPaths().pause, dir, PAUSE_IMAGE);
    return new RealNodeHost(dir, network, janitor, [pause, ...images]);
  }

  /** Starts a node and its `kubeadm join`; await node.joined() for the join's outcome. */
  async startNode(options: RealNodeOptions): Promise<RealNode> {
    const index = this.nextIndex++;
    const dir = mkdtempSync(join(this.dir, `${options.name}-`));
    const janitor = startJanitor(dir);
    const [kubeletPort, healthzPort] = [await freePort(), await freePort()];
    const subnet = `10.244.${index}`;
    const { discoveryPath } = writeNodeFiles(dir, options, { kubeletPort, healthzPort, subnet }, this.images);
    const binaries = nodeBinaryPaths();
    const lifeline = new Lifeline(
      'unshare',
      ['--mount', '--propagation', 'private', 'bash', join(here, 'node.sh')],
      {
        ...process.env,
        PATH: `${dirname(binaries.kubeadm)}:${process.env.PATH ?? ''}`,
        NODE_DIR: dir,
        NODE_NAME: options.name,
        NODE_GATEWAY: `${subnet}.1/24`,
        NODE_DISCOVERY_FILE: discoveryPath ?? '',
      },
      join(dir, 'node.stderr.log'),
    );
    if (lifeline.pid) this.network.send(`node ${lifeline.pid}`);
    const node = new RealNode(options.name, dir, kubeletPort, lifeline, janitor);
    this.nodes.push(node);
    await lifeline.event('containerd-ready', 120_000).catch((error: Error) => {
      throw new Error(`${options.name}: ${error.message}\n${node.logTail()}`);
    });
    return node;
  }

  async stop(): Promise<void> {
    for (const node of this.nodes.splice(0)) await node.stop();
    await this.network.close();
    this.janitor.release();
  }
}

function readLog(path: string): string {
  return existsSync(path) ? readFileSync(path, 'utf8').trim().split('\n').slice(-10).join('\n') : '';
}

interface NodePorts {
  kubeletPort: number;
  healthzPort: number;
  subnet: string;
}

/**
 * Where a file-discovery JoinConfiguration reads its discovery kubeconfig, or undefined for token
 * discovery. Only under /etc/kubernetes, which is the node's own tmpfs: never a path on the host.
 */
function discoveryPathOf(join_: Record<string, Record<string, unknown>>): string | undefined {
  const path = (join_.discovery?.file as { kubeConfigPath?: unknown } | undefined)?.kubeConfigPath;
  if (path === undefined) return undefined;
  if (typeof path !== 'string' || !/^\/etc\/kubernetes\/[A-Za-z0-9._-]+$/.test(path)) {
    throw new Error(
      `real nodes place the discovery kubeconfig in their own /etc/kubernetes only, not at ${String(path)}`,
    );
  }
  return path;
}

/**
 * The JoinConfiguration as the node's admin would run it here (and the discovery kubeconfig it
 * reads, copied by node.sh to its path inside the node), plus containerd's and CNI's config.
 */
function writeNodeFiles(
  dir: string,
  options: RealNodeOptions,
  ports: NodePorts,
  images: BuiltImage[],
): { discoveryPath: string | undefined } {
  const join_ = parse(options.joinConfiguration) as Record<string, Record<string, unknown>>;
  if (join_.apiVersion !== ('kubeadm.k8s.io/v1beta4' as unknown)) {
    throw new Error(
      'real nodes run the pinned kubeadm: the JoinConfiguration must be kubeadm.k8s.io/v1beta4',
    );
  }
  const discoveryPath = discoveryPathOf(join_);
  if (discoveryPath !== undefined) {
    if (options.discoveryKubeconfig === undefined) {
      throw new Error(
        `the JoinConfiguration reads ${discoveryPath}: pass its content as discoveryKubeconfig`,
      );
    }
    writeFileSync(join(dir, 'discovery.conf'), options.discoveryKubeconfig, { mode: 0o644 });
  }
  join_.nodeRegistration ??= {};
  const registration = join_.nodeRegistration;
  registration.name ??= options.name;
  // This host is a VM on cgroup v1 (SystemVerification), without IP forwarding (pods only talk to
  // the API server and each other), and runs several kubelets (the port check is for 10250 only).
  const ignored = ['SystemVerification', 'Port-10250'];
  if (readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim() !== '1') {
    ignored.push('FileContent--proc-sys-net-ipv4-ip_forward');
  }
  registration.ignorePreflightErrors = [
    ...((registration.ignorePreflightErrors as string[] | undefined) ?? []),
    ...ignored,
  ];
  join_.patches = { directory: join(dir, 'patches') };
  writeFileSync(join(dir, 'join.yaml'), stringify(join_), { mode: 0o600 });
  mkdirSync(join(dir, 'patches'));
  writeFileSync(
    join(dir, 'patches', 'kubeletconfiguration+merge.json'),
    JSON.stringify({ port: ports.kubeletPort, healthzPort: ports.healthzPort, readOnlyPort: 0 }),
  );
  writeFileSync(join(dir, 'containerd.toml'), containerdConfig());
  writeFileSync(join(dir, 'cni.conflist'), JSON.stringify(cniConfig(ports.subnet)));
  mkdirSync(join(dir, 'manifests'));
  for (const [i, pod] of (options.staticPods ?? []).entries()) {
    writeFileSync(join(dir, 'manifests', `static-${i}.yaml`), stringify(pod));
  }
  mkdirSync(join(dir, 'images'));
  for (const image of images) {
    execFileSync('ln', ['-s', image.tarball, join(dir, 'images', `${image.imageId.slice(0, 12)}.tar`)]);
  }
  return { discoveryPath };
}

/** containerd 1.6 (config version 2) for this host; see ../shared/REALNODE.md for each setting. */
function containerdConfig(): string {
  return `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  # The VM lacks CAP_SYS_RESOURCE: without this every sandbox fails in runc create.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
`;
}

/**
 * A bridge on cni0 with this node's own /24. Not a gateway bridge (that would switch on the host's
 * IP forwarding): the node script puts the gateway address on cni0, and pods get routes only to
 * the pod network and the Service range, so nothing from a pod has a way off the machine.
 */
function cniConfig(subnet: string): object {
  const gateway = `${subnet}.1`;
  return {
    cniVersion: '0.4.0',
    name: 'nodeflavor-e2e',
    plugins: [
      {
        type: 'bridge',
        bridge: 'cni0',
        isGateway: false,
        ipMasq: false,
        hairpinMode: true,
        ipam: {
          type: 'host-local',
          ranges: [[{ subnet: `${subnet}.0/24`, gateway }]],
          routes: [
            { dst: NETWORKING.podSubnet, gw: gateway },
            { dst: NETWORKING.serviceSubnet, gw: gateway },
          ],
        },
      },
    ],
  };
}
