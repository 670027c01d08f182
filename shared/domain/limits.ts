/** Network limits of an instance type, as DescribeInstanceTypes reports them (NetworkInfo). */
export interface InstanceLimits {
  readonly instanceType: string;
  /** Across all network cards. */
  readonly maxEnis: number;
  /** Primary address included, as AWS counts it. */
  readonly ipv4PerEni: number;
  readonly defaultNetworkCardIndex: number;
  readonly networkCards: readonly { readonly networkCardIndex: number; readonly maxEnis: number }[];
  readonly hypervisor?: string;
  readonly bareMetal?: boolean;
}

/** Addresses in one delegated IPv4 prefix (/28). */
export const ADDRESSES_PER_PREFIX = 16;
