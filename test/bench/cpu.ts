import { readFileSync } from 'node:fs';

const CLOCK_TICKS_PER_S = 100; // USER_HZ on Linux

/**
 * CPU time (user + system) of this process's children that have exited and been reaped — every plugin process
 * the benchmark spawned. On a loaded shared machine throughput is mostly a measure of the neighbours; CPU per
 * pod is a property of the plugin, and cores × 1000 / cpuMsPerPod bounds pods/s on an idle machine.
 */
export function childrenCpuMs(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  // Fields after the command name (which may contain spaces) start at field 3; cutime and cstime are 16 and 17.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const cutime = Number(fields[13]);
  const cstime = Number(fields[14]);
  return ((cutime + cstime) * 1000) / CLOCK_TICKS_PER_S;
}

/** CPU time of this process itself (dynalite, proxies, simulators running in it). */
export function selfCpuMs(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1000;
}
