// Records, for each node, when a label first appeared (as a watch sees it), so the controller
// and the baseline are timed by the same clock and the same watch delivery.
import type { KubeConfig } from '@kubernetes/client-node';
import { type TrimmedNode, trimNode } from '../src/kube/node-writes.ts';
import { ListWatch } from '../src/runtime/listwatch.ts';

export class LabelObserver {
  readonly seenAt = new Map<string, number>();
  private readonly watch: ListWatch<TrimmedNode>;
  private waiters: (() => void)[] = [];

  constructor(kubeConfig: KubeConfig, prefix: string, label: string) {
    this.watch = new ListWatch<TrimmedNode>({
      kubeConfig,
      path: '/api/v1/nodes',
      transform: trimNode,
      onEvent: (type, node) => {
        const name = node.metadata.name;
        if (type === 'DELETED' || !name.startsWith(prefix) || this.seenAt.has(name)) return;
        if (node.metadata.labels?.[label] !== undefined) {
          this.seenAt.set(name, performance.timeOrigin + performance.now());
          for (const wake of this.waiters.splice(0)) wake();
        }
      },
    });
  }

  start(): Promise<void> {
    return this.watch.start();
  }

  async waitForCount(count: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.seenAt.size < count) {
      if (Date.now() > deadline)
        throw new Error(`only ${this.seenAt.size}/${count} nodes got the label within ${timeoutMs / 1000} s`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 1000).unref();
      });
    }
  }

  stop(): void {
    this.watch.stop();
  }
}
