import { cpus, loadavg, release, totalmem } from 'node:os';

/** What a figure was measured on: numbers from a loaded two-core VM and an idle workstation differ by 3×. */
export interface MachineInfo {
  readonly cpuModel: string;
  readonly cores: number;
  /** 1, 5 and 15 minute load averages when the benchmark finished. */
  readonly loadAverage: readonly number[];
  readonly memoryGiB: number;
  readonly node: string;
  readonly kernel: string;
}

export function machineInfo(): MachineInfo {
  const cpu = cpus();
  return {
    cpuModel: cpu[0]?.model.trim() ?? 'unknown',
    cores: cpu.length,
    loadAverage: loadavg().map((l) => Math.round(l * 100) / 100),
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    kernel: release(),
  };
}
