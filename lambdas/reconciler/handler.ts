// Placeholder entry point so the CDK app can bundle this function before its issue lands; replaced by the
// real handler. It fails loudly rather than pretending to work.
export async function handler(): Promise<never> {
  throw new Error('reconciler: not implemented yet');
}
