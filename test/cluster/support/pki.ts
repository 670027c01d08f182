import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** One identity's files: a key and a certificate signed by the cluster CA. */
export interface CertPair {
  readonly cert: string;
  readonly key: string;
}

export interface CertRequest {
  /** The file name stem, e.g. `apiserver`. */
  readonly name: string;
  /** The certificate's subject common name: the user name the API server authenticates. */
  readonly cn: string;
  /** Organizations: the user's groups (`system:masters`, `system:nodes`). */
  readonly groups?: readonly string[];
  /** Subject alternative names for a serving certificate (`IP:…`, `DNS:…`). */
  readonly san?: readonly string[];
}

/**
 * The cluster's keys, made with openssl when the suite starts (none is committed): a CA that signs every client
 * and serving certificate, and the service-account signing key, as local-up-cluster.sh makes them.
 */
export class ClusterPki {
  readonly caCert: string;
  readonly caKey: string;
  readonly serviceAccountKey: string;
  readonly serviceAccountPub: string;

  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
    this.caKey = join(dir, 'ca.key');
    this.caCert = join(dir, 'ca.crt');
    openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', this.caKey]);
    openssl([
      'req',
      '-x509',
      '-new',
      '-key',
      this.caKey,
      '-subj',
      '/CN=vpc-lease-test-ca',
      '-days',
      '2',
      '-out',
      this.caCert,
    ]);
    this.serviceAccountKey = join(dir, 'sa.key');
    this.serviceAccountPub = join(dir, 'sa.pub');
    openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', this.serviceAccountKey]);
    openssl(['pkey', '-in', this.serviceAccountKey, '-pubout', '-out', this.serviceAccountPub]);
  }

  /** A key and a certificate for `request`, signed by the CA (client and server usage both allowed). */
  issue(request: CertRequest): CertPair {
    const key = join(this.dir, `${request.name}.key`);
    const csr = join(this.dir, `${request.name}.csr`);
    const cert = join(this.dir, `${request.name}.crt`);
    const ext = join(this.dir, `${request.name}.ext`);
    const subject = `/CN=${request.cn}${(request.groups ?? []).map((g) => `/O=${g}`).join('')}`;
    openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
    openssl(['req', '-new', '-key', key, '-subj', subject, '-out', csr]);
    writeFileSync(
      ext,
      [
        'basicConstraints=CA:FALSE',
        'keyUsage=critical,digitalSignature,keyEncipherment',
        'extendedKeyUsage=serverAuth,clientAuth',
        ...(request.san && request.san.length > 0 ? [`subjectAltName=${request.san.join(',')}`] : []),
      ].join('\n'),
    );
    openssl([
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      this.caCert,
      '-CAkey',
      this.caKey,
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      ext,
      '-out',
      cert,
    ]);
    return { cert, key };
  }

  /** A kubeconfig for `pair` against `server`, with the certificate data inline as kubeadm writes them. */
  kubeconfig(name: string, server: string, pair: CertPair): string {
    const file = join(this.dir, `${name}.kubeconfig`);
    const b64 = (path: string): string => readFileSync(path).toString('base64');
    const config = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'local', cluster: { server, 'certificate-authority-data': b64(this.caCert) } }],
      users: [{ name, user: { 'client-certificate-data': b64(pair.cert), 'client-key-data': b64(pair.key) } }],
      contexts: [{ name: 'local', context: { cluster: 'local', user: name } }],
      'current-context': 'local',
    };
    writeFileSync(file, JSON.stringify(config, null, 2), { mode: 0o600 });
    return file;
  }
}

function openssl(args: readonly string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}
