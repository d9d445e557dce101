// A real node must not outlive the test that started it, however that test ends: here its process
// is SIGKILLed while the node runs a Pod, and everything the node had made goes away on its own —
// containers and their shims, containerd, the kubelet, mounts, cni0, the iptables rules and the
// kubelet's own chains, cgroups,
// the mount points and temp dirs.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';
import { skipUnless } from '../support/skip.ts';
import { ControlPlane } from './cluster/controlplane.ts';
import { HOST_LOCK, HOST_LOCK_HELD_ENV, realNodesUnsupported } from './realnode/real-node.ts';
import { loadEnvironment } from './support/environment.ts';
import { waitFor } from './support/wait.ts';

const unsupported = skipUnless(
  'the real-node clean-up test (test/e2e/real-node-cleanup.test.ts)',
  realNodesUnsupported(),
);
const MOUNT_POINTS = [
  '/etc/kubernetes',
  '/var/lib/kubelet',
  '/var/lib/containerd',
  '/run/containerd',
  '/etc/cni',
  '/var/lib/cni',
  '/run/netns',
];
const NODE_PROCESSES = new Set([
  'kubelet',
  'containerd',
  'containerd-shim',
  'containerd-shim-runc-v2',
  'pause',
  'kubeadm',
]);

/** Live node processes. Zombies are not counted: some sandboxes' init never reaps orphans. */
function nodeProcesses(): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      const zombie = /^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (NODE_PROCESSES.has(comm) && !zombie) found.push(`${pid} ${comm}`);
    } catch {
      // gone
    }
  }
  return found;
}

/** "iptables filter KUBE-FIREWALL": every KUBE-* chain now (the kubelet makes some, in both families). */
function kubeChains(): string[] {
  const chains: string[] = [];
  for (const tool of ['iptables', 'ip6tables'])
    for (const table of ['filter', 'nat', 'mangle']) {
      let rules = '';
      try {
        rules = execFileSync(tool, ['-t', table, '-S'], {
          encoding: 'utf8',
          stdio: ['ignore', 'pipe', 'ignore'],
        });
      } catch {
        continue; // no such family or table here
      }
      for (const match of rules.matchAll(/^-N (KUBE-\S+)$/gm)) chains.push(`${tool} ${table} ${match[1]}`);
    }
  return chains;
}

function leftovers(dir: string, before: { mountPoints: string[]; chains: string[] }): string[] {
  const absentBefore = before.mountPoints;
  const left: string[] = [];
  if (existsSync(dir)) left.push(`temp dir ${dir}`);
  left.push(...nodeProcesses().map((p) => `process ${p}`));
  try {
    execFileSync('ip', ['link', 'show', 'cni0'], { stdio: 'ignore' });
    left.push('cni0');
  } catch {
    // gone, as it should be
  }
  const rules = `${execFileSync('iptables', ['-S'], { encoding: 'utf8' })}${execFileSync('iptables', ['-t', 'nat', '-S'], { encoding: 'utf8' })}`;
  left.push(
    ...rules
      .split('\n')
      .filter((r) => r.includes('cni0'))
      .map((r) => `iptables ${r}`),
  );
  left.push(
    ...readdirSync('/sys/fs/cgroup')
      .filter((c) => existsSync(`/sys/fs/cgroup/${c}/k8s.io`))
      .map((c) => `cgroup ${c}/k8s.io`),
  );
  left.push(...absentBefore.filter((m) => existsSync(m)).map((m) => `mount point ${m}`));
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8');
  left.push(...MOUNT_POINTS.filter((m) => mounts.includes(` ${m} `)).map((m) => `mount ${m}`));
  left.push(
    ...kubeChains()
      .filter((c) => !before.chains.includes(c))
      .map((c) => `chain ${c}`),
  );
  return left;
}

describe('real nodes leave nothing behind', { skip: unsupported }, () => {
  it('when the test process is SIGKILLed while the node runs a Pod', async () => {
    // Its own control plane, as the real-node suite has, whatever cluster E2E_KUBECONFIG names.
    const plane = await ControlPlane.start({ log: () => undefined });
    const env = await loadEnvironment(plane.kubeconfigPath);
    const name = `cleanup-${Math.random().toString(36).slice(2, 6)}`;
    // Hold the real-node host lock for the whole test, so no other suite's nodes are counted.
    const lock = spawn(
      'flock',
      ['--exclusive', HOST_LOCK, 'bash', '-c', 'echo locked; while read -r _; do :; done'],
      {
        stdio: ['pipe', 'pipe', 'inherit'],
      },
    );
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: lock.stdout }).once('line', () => resolve());
      lock.once('exit', (code) => reject(new Error(`flock exited ${code}`)));
    });
    const absentBefore = { mountPoints: MOUNT_POINTS.filter((m) => !existsSync(m)), chains: kubeChains() };
    assert.deepEqual(nodeProcesses(), [], 'a real node is already running on this host');
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', join(import.meta.dirname, 'realnode', 'fixture-child.ts'), name],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { ...process.env, E2E_KUBECONFIG: plane.kubeconfigPath, [HOST_LOCK_HELD_ENV]: '1' },
      },
    );
    try {
      const dir = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).on('line', (line) => {
          const match = /^ready (\S+)$/.exec(line);
          if (match?.[1]) resolve(match[1]);
        });
        child.on('exit', (code) =>
          reject(new Error(`the node process exited (${code}) before it was ready`)),
        );
      });
      // The kubelet runs the static Pod: a mirror Pod reports it Running.
      await waitFor(
        async () => {
          const pod = await env.core.readNamespacedPod({ name: `sleeper-${name}`, namespace: 'default' });
          return pod.status?.phase === 'Running';
        },
        { what: `the static Pod on ${name} to run`, timeoutMs: 120_000 },
      );
      assert.ok(leftovers(dir, absentBefore).length >= 5, 'the node should be running right now');
      child.kill('SIGKILL');
      const left = await waitFor(
        () => {
          const now = leftovers(dir, absentBefore);
          return now.length === 0 ? now : undefined;
        },
        { what: 'the node to tear itself down', timeoutMs: 60_000, intervalMs: 250 },
      ).catch((error: Error) => {
        throw new Error(`${error.message}: still there: ${leftovers(dir, absentBefore).join(', ')}`);
      });
      assert.deepEqual(left, []);
    } finally {
      child.kill('SIGKILL');
      await plane.stop();
      lock.stdin?.end();
    }
  });
});
