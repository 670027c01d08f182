import type { SeededRandom } from './random.js';

/**
 * Per-action service latency, in AWS milliseconds (scaled by timeScale), with ±30 % seeded jitter.
 *
 * The figures are typical p50 round trips of the EC2 API from inside the same region, as commonly reported
 * by operators of ENI-managing controllers (amazon-vpc-cni-k8s exports them as `awscni_aws_api_latency_ms`;
 * Describe calls ~100–200 ms, ENI create/assign ~300–500 ms, attach ~500 ms for the API call alone, with the
 * attachment itself completing seconds later; RunInstances ~1 s). They are order-of-magnitude estimates to
 * give benchmarks realistic proportions, not measurements made here.
 */
export const DEFAULT_LATENCY_MS: Readonly<Record<string, number>> = {
  'Describe*': 150,
  DescribeNetworkInterfaces: 200,
  DescribeInstances: 200,
  CreateNetworkInterface: 400,
  AttachNetworkInterface: 500,
  DetachNetworkInterface: 300,
  DeleteNetworkInterface: 300,
  AssignPrivateIpAddresses: 300,
  UnassignPrivateIpAddresses: 250,
  ModifyNetworkInterfaceAttribute: 200,
  CreateTags: 150,
  DeleteTags: 150,
  RunInstances: 1000,
  TerminateInstances: 500,
  '*': 250,
};

export class LatencyModel {
  /** The AWS-like model on or off (off by default so tests are fast). */
  modelEnabled: boolean;
  /** Extra real milliseconds per action (or `*`), added on top of the model; not scaled. */
  private readonly extraRealMs = new Map<string, number>();

  constructor(
    private readonly random: SeededRandom,
    modelEnabled: boolean,
    private readonly figures: Readonly<Record<string, number>> = DEFAULT_LATENCY_MS,
  ) {
    this.modelEnabled = modelEnabled;
  }

  setExtra(action: string, realMs: number): void {
    if (realMs <= 0) this.extraRealMs.delete(action);
    else this.extraRealMs.set(action, realMs);
  }

  /** Modelled AWS milliseconds for one call (0 when the model is off). */
  simMs(action: string): number {
    if (!this.modelEnabled) return 0;
    const base =
      this.figures[action] ??
      (action.startsWith('Describe') ? this.figures['Describe*'] : undefined) ??
      this.figures['*'] ??
      0;
    return base * (0.7 + 0.6 * this.random.next());
  }

  extraMs(action: string): number {
    return (this.extraRealMs.get(action) ?? 0) + (this.extraRealMs.get('*') ?? 0);
  }
}
