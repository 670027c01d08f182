import { startupSnapshot } from 'node:v8';
import { runCli } from '../cli.js';
import { isTestMode } from '../config/overrides.js';

/**
 * The entry of the self-contained executable (a Node single executable application, built by packaging/build.ts).
 * By default it ships with V8's code cache and runs main() at once. Built with `startup: 'snapshot'`, Node runs
 * this bundle at build time and saves the heap as a V8 startup snapshot, and main() runs after deserializing
 * it. The native parts cannot live in a snapshot: they are loaded on first use, by absolute path beside the
 * executable (packaging/build.ts, netlinkBindingBeside).
 */
function main(): void {
  // Outside tests the native parts come only from beside the executable, never from a directory the caller names.
  if (!isTestMode(process.env)) delete process.env['VPC_LEASE_NATIVE_DIR'];
  // One dispatch line; exit explicitly so a kept-alive socket can never hold the runtime waiting.
  runCli(process.argv.slice(2), process.env).then((code) => process.exit(code));
}

if (startupSnapshot.isBuildingSnapshot()) {
  // Evaluate the rtnetlink modules into the snapshot too (their binding is loaded lazily, see packaging/build.ts);
  // ADD and DEL then only pay for dlopen of the binding.
  void Promise.all([
    import('netlink/dist/rt/rt.js'),
    import('netlink/dist/structs.js'),
    import('netlink/dist/rt/ifla.js'),
  ]);
  startupSnapshot.setDeserializeMainFunction(main);
} else {
  main();
}
