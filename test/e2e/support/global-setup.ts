// node --test --test-global-setup: one control plane for the whole e2e run, unless
// E2E_KUBECONFIG names a cluster to use instead (e.g. kind). Test files (separate processes)
// find it through E2E_KUBECONFIG.
import { ControlPlane } from '../cluster/controlplane.ts';
import { AUDITED_GROUPS } from './audit.ts';

let plane: ControlPlane | undefined;

export async function globalSetup(): Promise<void> {
  if (process.env.E2E_KUBECONFIG) {
    process.stderr.write(`[e2e] using the cluster in E2E_KUBECONFIG=${process.env.E2E_KUBECONFIG}\n`);
    return;
  }
  plane = await ControlPlane.start({
    log: (line) => process.stderr.write(`[e2e control-plane] ${line}\n`),
    auditUserGroups: AUDITED_GROUPS,
  });
  process.env.E2E_KUBECONFIG = plane.kubeconfigPath;
  process.env.E2E_LOCAL_CONTROL_PLANE_DIR = plane.dir;
  process.stderr.write(`[e2e] kube-apiserver ${await plane.serverVersion()} at ${plane.server}\n`);
}

export async function globalTeardown(): Promise<void> {
  await plane?.stop();
}
