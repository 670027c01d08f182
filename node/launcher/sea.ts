import { startupSnapshot } from 'node:v8';
import { runCli } from '../cli.js';

/**
 * The entry of the self-contained executable (a Node single executable application, built by infra/build.ts).
 * At build time Node runs this bundle once and saves the heap as a V8 startup snapshot, so every CNI call
 * deserializes an already evaluated module graph instead of compiling and evaluating ~300 KiB of JavaScript.
 * The native parts cannot live in a snapshot: they are loaded on first use, by absolute path beside the
 * executable (see nativeBeside).
 */
function main(): void {
  // Outside tests the native parts come only from beside the executable, never from a directory the caller names.
  if (process.env['VPC_LEASE_TEST_MODE'] !== '1') delete process.env['VPC_LEASE_NATIVE_DIR'];
  // One dispatch line; exit explicitly so a kept-alive socket can never hold the runtime waiting.
  runCli(process.argv.slice(2), process.env).then((code) => process.exit(code));
}

if (startupSnapshot.isBuildingSnapshot()) {
  // Evaluate the rtnetlink modules into the snapshot too (their binding is loaded lazily, see infra/build.ts);
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
