import { request } from 'node:http';

/**
 * A minimal HTTP/1.1 call over node:http. IMDS is plain HTTP on a link-local (or loopback) address, and
 * node:http is already in Node's startup snapshot where fetch would pull in undici on first use.
 */
export interface HttpResponse {
  readonly status: number;
  readonly body: string;
}

export function httpCall(
  method: 'GET' | 'PUT',
  url: string,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<HttpResponse> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method, headers, timeout: timeoutMs, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${url} timed out after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}
