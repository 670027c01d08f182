/**
 * The release this build is, as package.json says (test/unit/version.test.ts keeps them equal). A constant, not
 * an import of package.json, which would carry the whole file, dependency names included, into every bundle.
 */
export const VPC_LEASE_VERSION = '0.1.0';
