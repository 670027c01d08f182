/**
 * A seeded generator (mulberry32) so ids, MACs, address choice and probabilistic faults repeat under a seed.
 */
export class SeededRandom {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** Integer in [0, bound). */
  int(bound: number): number {
    return Math.floor(this.next() * bound);
  }
  hex(digits: number): string {
    let out = '';
    while (out.length < digits) out += this.int(0x10000).toString(16).padStart(4, '0');
    return out.slice(0, digits);
  }
  /** EC2-style id: prefix + 17 hex digits, e.g. `eni-0a1b…`. */
  id(prefix: string): string {
    return `${prefix}-${this.hex(17)}`;
  }
  /** A locally administered unicast MAC, as EC2 hands out (`02:…` in the simulator). */
  mac(): string {
    const bytes = Array.from({ length: 5 }, () => this.int(256).toString(16).padStart(2, '0'));
    return ['02', ...bytes].join(':');
  }
}
